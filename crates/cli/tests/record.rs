//! What `check`, `hook` and `exec` write to the audit ledger, and that a decision that cannot be
//! recorded does not take effect (fail closed). Each test runs the real binary in its own
//! temporary world; the ledger is read back from its file and checked with `pinfold audit
//! verify`. The `exec` tests need a kernel that can run the sandbox (CI runs them as root).

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::BIN;
use crate::support::hook::{Out, temp_project};

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    /// Where the ledger is: `$XDG_STATE_HOME/pinfold`.
    state: PathBuf,
    proj: PathBuf,
    env: Vec<(String, String)>,
}

impl World {
    fn new() -> World {
        let (dir, root) = temp_project();
        let home = root.join("home");
        let proj = root.join("proj");
        let state = root.join("xdg-state/pinfold");
        World { _dir: dir, root, home, state, proj, env: Vec::new() }
    }

    fn set(&mut self, k: &str, v: &str) {
        self.env.push((k.to_string(), v.to_string()));
    }

    /// Write a file; a policy file in the project is approved, as its author would.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        if p.starts_with(&self.proj) {
            crate::support::approve_policy(&p, &self.state);
        }
        p
    }

    fn run(&self, args: &[&str], stdin: &[u8]) -> Out {
        let mut full = vec![BIN];
        full.extend_from_slice(args);
        self.run_with_stdin(&full, stdin)
    }

    /// Run `argv[0]` (another program) in the world; stdin from `payload.json` if it exists.
    fn run_program(&self, argv: &[&str]) -> Out {
        let stdin = fs::read(self.root.join("payload.json")).unwrap_or_default();
        self.run_with_stdin(argv, &stdin)
    }

    fn run_with_stdin(&self, argv: &[&str], stdin: &[u8]) -> Out {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..])
            .current_dir(&self.proj)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.root.join("xdg-state"))
            .env("PINFOLD_CACHE_DIR", self.root.join("cache"))
            .env("TMPDIR", &self.root)
            .env_remove("PINFOLD_STATE_DIR")
            .env_remove("PINFOLD_LEDGER_KEY")
            .env_remove("PINFOLD_SESSION")
            .env_remove("PINFOLD_HOOK_ORIGIN")
            .env_remove("XDG_RUNTIME_DIR");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let o = child.wait_with_output().expect("wait");
        Out {
            code: o.status.code().expect("an exit code"),
            stdout: String::from_utf8(o.stdout).unwrap(),
            stderr: String::from_utf8(o.stderr).unwrap(),
        }
    }

    /// The records, oldest first, read from the file.
    fn records(&self) -> Vec<Value> {
        let text = fs::read_to_string(self.state.join("ledger.jsonl")).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).expect("a record is JSON")).collect()
    }

    fn verify(&self) {
        let o = self.run(&["audit", "verify"], b"");
        assert_eq!(o.code, 0, "verify: {}{}", o.stdout, o.stderr);
    }

    /// A state directory that cannot be created: its parent is a file.
    fn break_state(&mut self) {
        self.write("not-a-dir", "");
        let p = self.root.join("not-a-dir/state").display().to_string();
        self.set("PINFOLD_STATE_DIR", &p);
    }

    fn claude(&self, session: &str, tool: &str, input: Value) -> Value {
        json!({
            "session_id": session,
            "cwd": self.proj,
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": input,
        })
    }
}

#[test]
fn check_records_each_verdict_with_the_rules_that_matched() {
    let w = World::new();
    w.write("proj/pinfold.toml", "[[rules]]\nallow = 'ls *'\n[[rules]]\ndeny = 'rm -r *'\n");
    for (cmd, code) in [("ls -la", 0), ("make", 10), ("rm -rf ~", 11)] {
        let o = w.run(&["check", "--", cmd], b"");
        assert_eq!(o.code, code, "{cmd}: {}", o.stderr);
    }
    let r = w.records();
    assert_eq!(r.len(), 3, "{r:#?}");
    let seen: Vec<(&str, &str, &str)> =
        r.iter().map(|r| (r["kind"].as_str().unwrap(), r["data"]["command"].as_str().unwrap(), r["data"]["decision"].as_str().unwrap())).collect();
    assert_eq!(seen, [("check", "ls -la", "allow"), ("check", "make", "ask"), ("check", "rm -rf ~", "deny")]);
    assert_eq!(r[2]["data"]["commands"][0]["rules"][0], json!({"action": "deny", "pattern": "rm -r *", "source": "pinfold.toml:4"}));
    assert_eq!(r[0]["data"]["cwd"], w.proj.display().to_string());
    assert!(r[0]["pid"].as_u64().unwrap() > 0);
    assert!(r[0].get("session").is_none());
    w.verify();
}

#[test]
fn session_comes_from_the_environment_for_check() {
    let mut w = World::new();
    w.set("PINFOLD_SESSION", "run-42");
    assert_eq!(w.run(&["check", "--", "ls"], b"").code, 0);
    assert_eq!(w.records()[0]["session"], "run-42");
    let o = w.run(&["audit", "show", "--session", "run-42", "--json"], b"");
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.stdout);
}

#[test]
fn check_fails_closed_when_the_ledger_cannot_be_written() {
    let mut w = World::new();
    w.break_state();
    let o = w.run(&["check", "--", "ls"], b"");
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert_eq!(o.stdout, "", "no verdict is given");
    assert!(o.stderr.contains("cannot record the decision in the audit ledger"), "{}", o.stderr);
    assert!(o.stderr.contains("not-a-dir/state"), "{}", o.stderr);
    assert!(o.stderr.contains("hint: "), "{}", o.stderr);
}

#[test]
fn the_users_config_can_turn_recording_off_and_a_project_cannot() {
    let mut w = World::new();
    w.break_state();
    w.write("home/.config/pinfold/config.toml", "[audit]\nenabled = false\n");
    let o = w.run(&["check", "--", "ls"], b"");
    assert_eq!((o.code, o.stdout.as_str()), (10, "ask: no rule matches `ls`; the default is ask: allowing it lets `ls` run unjudged, with no sandbox\n"), "{}", o.stderr);
    assert!(!w.root.join("not-a-dir/state").exists());

    let w = World::new();
    w.write("proj/pinfold.toml", "[defaults]\naction = 'allow'\n[audit]\nenabled = false\n");
    let o = w.run(&["check", "--", "ls"], b"");
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("pinfold.toml:4:11"), "{}", o.stderr);
    assert!(o.stderr.contains("cannot turn the audit ledger off"), "{}", o.stderr);
    assert!(w.records().is_empty());
}

#[test]
fn values_of_redact_env_never_reach_the_ledger() {
    let mut w = World::new();
    let secret = "zq9-deploy-4f7a1c0e-value";
    w.set("DEPLOY_KEY", secret);
    w.write("home/.config/pinfold/config.toml", "[audit]\nredact_env = ['DEPLOY_KEY']\n");
    let cmd = format!("curl -d {secret} https://example.com/ -H 'Authorization: Bearer abcdefghijklmnop1234'"); // address-literal: never connected (judged by `check`, never run)
    w.run(&["check", "--", &cmd], b"");
    let text = fs::read_to_string(w.state.join("ledger.jsonl")).unwrap();
    assert!(!text.contains(secret), "{text}");
    assert!(!text.contains("abcdefghijklmnop1234"), "{text}");
    let r = &w.records()[0];
    assert!(r["data"]["command"].as_str().unwrap().contains("[REDACTED]"), "{r}");
    assert_eq!(r["redacted"]["sha256"].as_str().unwrap().len(), 64);
    w.verify();
}

#[test]
fn hook_records_agent_tool_session_and_answer_without_live_tokens() {
    let w = World::new();
    let p = w.claude("sess-7", "Bash", json!({"command": "cargo test && echo ok", "description": "run tests"}));
    let o = w.run(&["hook", "claude-code"], p.to_string().as_bytes());
    assert_eq!(o.code, 0, "{}", o.stderr);
    let answer: Value = serde_json::from_str(&o.stdout).unwrap();
    let rewritten = answer["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap();
    let token = rewritten.split("PINFOLD_HOOK_ORIGIN=").nth(1).unwrap().split(' ').next().unwrap();
    assert_eq!(token.len(), "v1.".len() + 10 + 1 + 64, "{token}");

    let r = w.records();
    assert_eq!(r.len(), 1, "{r:#?}");
    let (rec, d) = (&r[0], &r[0]["data"]);
    assert_eq!(rec["kind"], "hook");
    assert_eq!(rec["session"], "sess-7");
    assert_eq!((d["agent"].as_str(), d["tool"].as_str(), d["event"].as_str()), (Some("claude-code"), Some("Bash"), Some("PreToolUse")));
    assert_eq!(d["command"], "cargo test && echo ok");
    assert_eq!(d["decision"], answer["hookSpecificOutput"]["permissionDecision"]);
    let recorded = d["answer"]["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap();
    let mac = &token[token.len() - 64..];
    assert!(!recorded.contains(mac), "a usable token was recorded: {recorded}");
    assert!(recorded.contains(&format!("{}…", &token[..token.len() - 48])), "{recorded}");

    // A file tool's decision, and a call pinfold has no opinion on (not recorded).
    let p = w.claude("sess-7", "Write", json!({"file_path": "/etc/passwd", "content": "x"}));
    assert_eq!(w.run(&["hook", "claude-code"], p.to_string().as_bytes()).code, 0);
    let p = w.claude("sess-7", "WebFetch", json!({"url": "https://example.com"})); // address-literal: never connected (hook input, judged only)
    assert_eq!(w.run(&["hook", "claude-code"], p.to_string().as_bytes()).stdout, "");
    let r = w.records();
    assert_eq!(r.len(), 2, "{r:#?}");
    assert_eq!((r[1]["data"]["path"].as_str(), r[1]["data"]["decision"].as_str()), (Some("/etc/passwd"), Some("deny")));
    w.verify();
}

#[test]
fn hook_fails_closed_in_each_agents_protocol_when_the_ledger_cannot_be_written() {
    let mut w = World::new();
    w.break_state();
    let p = w.claude("s", "Bash", json!({"command": "ls"}));
    let o = w.run(&["hook", "claude-code"], p.to_string().as_bytes());
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert_eq!(o.stdout, "");
    assert!(o.stderr.contains("cannot record the decision"), "{}", o.stderr);
    // Cursor lets a failed hook through: the refusal is on stdout.
    let p = json!({"hook_event_name": "beforeShellExecution", "conversation_id": "c1", "command": "ls", "cwd": w.proj});
    let o = w.run(&["hook", "cursor"], p.to_string().as_bytes());
    assert_eq!(o.code, 0);
    let a: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(a["permission"], "deny", "{a}");
    assert!(a["user_message"].as_str().unwrap().contains("cannot record"), "{a}");
}

#[test]
fn a_failing_hook_is_recorded_too() {
    let w = World::new();
    let o = w.run(&["hook", "claude-code"], br#"{"session_id": "s9", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}"#);
    assert_eq!(o.code, 2);
    let r = w.records();
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0]["session"], "s9");
    assert_eq!(r[0]["data"]["decision"], "deny");
    assert!(r[0]["data"]["error"].as_str().unwrap().contains("no `command`"), "{}", r[0]);
}

#[test]
fn exec_records_start_and_end_and_refusals() {
    let w = World::new();
    w.write("proj/pinfold.toml", "extends = ['pinfold:default']\n[[rules]]\nallow = 'sh *'\n[[rules]]\ndeny = 'rm -r /'\n");
    let o = w.run(&["exec", "--", "sh -c 'exit 3'"], b"");
    assert_eq!(o.code, 3, "{}", o.stderr);
    let o = w.run(&["exec", "--", "rm -rf /"], b"");
    assert_eq!(o.code, 126);
    let r = w.records();
    let kinds: Vec<&str> = r.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["exec_start", "exec_end", "exec_refused"], "{r:#?}");
    let (start, end, refused) = (&r[0]["data"], &r[1]["data"], &r[2]["data"]);
    assert_eq!(start["command"], "sh -c 'exit 3'");
    assert_eq!(start["decision"], "allow");
    assert_eq!(start["sandbox"]["preset"], "workspace");
    assert_eq!(start["sandbox"]["network"], "off");
    assert_eq!(start["argv"], json!(["/bin/bash", "-c", "sh -c 'exit 3'"]));
    assert_eq!(end["start_seq"], r[0]["seq"]);
    assert_eq!(end["exit"], 3);
    assert!(end["duration_us"].as_u64().unwrap() > 0);
    assert!(end["sandbox"]["landlock"].is_object(), "{end}");
    assert!(end["sandbox"]["seccomp"].as_u64().unwrap() > 0, "{end}");
    assert_eq!(refused["decision"], "deny");
    assert_eq!(refused["command"], "rm -rf /");
    w.verify();
}

#[test]
fn exec_runs_nothing_when_the_start_cannot_be_recorded() {
    let mut w = World::new();
    w.break_state();
    let marker = w.proj.join("ran");
    let o = w.run(&["exec", "--", &format!("touch {}", marker.display())], b"");
    assert_eq!(o.code, 125, "{}", o.stderr);
    assert!(o.stderr.contains("cannot record the decision"), "{}", o.stderr);
    assert!(!marker.exists(), "the command ran without being recorded");
}

/// The sandbox is set up while the start of the run is recorded (the ledger's exec_start
/// and the record of the roots open to it, trust.rs), and the command waits, confined, for
/// that to finish: when the record of the roots cannot be written (here the file is a
/// directory), the sandbox is torn down and nothing of the command runs.
#[test]
fn exec_runs_nothing_when_its_roots_cannot_be_recorded() {
    let w = World::new();
    fs::create_dir_all(w.state.join("sandbox-roots")).unwrap();
    let marker = w.proj.join("ran");
    let o = w.run(&["exec", "--", &format!("touch {}", marker.display())], b"");
    assert_eq!(o.code, 125, "{}", o.stderr);
    assert!(!marker.exists(), "the command ran before its start was recorded");
    // The control: the same run once the record can be written.
    fs::remove_dir(w.state.join("sandbox-roots")).unwrap();
    let o = w.run(&["exec", "--", &format!("touch {}", marker.display())], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(marker.exists(), "{}", o.stderr);
}

/// pinfold starts without std's runtime (main.rs), so it opens `/dev/null` on closed standard
/// descriptors itself: otherwise, started with stdout closed, the ledger would be opened as
/// descriptor 1 and the verdict printed into it. Each of 0, 1 and 2 closed in turn, then the
/// ledger must hold exactly the three check records and verify.
#[test]
fn closed_standard_descriptors_do_not_become_the_ledger() {
    let mut w = World::new();
    // No policy cache: it would be opened first and held (so the ledger would get 3).
    w.set("PINFOLD_NO_CACHE", "1");
    for fd in 0..3 {
        let o = w.run_program(&["/bin/sh", "-c", &format!("exec \"$0\" check -- 'git status' {fd}>&-"), BIN]);
        assert_eq!(o.code, 0, "fd {fd} closed: {}", o.stderr);
    }
    let text = fs::read_to_string(w.state.join("ledger.jsonl")).unwrap();
    assert!(text.lines().all(|l| l.starts_with('{')), "the verdict went into the ledger:\n{text}");
    let records = w.records();
    assert_eq!(records.len(), 3, "{records:?}");
    assert!(records.iter().all(|r| r["kind"] == "check"), "{records:?}");
    w.verify();
}

#[test]
fn the_sandbox_cannot_read_or_write_the_ledger_even_inside_the_project() {
    let mut w = World::new();
    w.write("proj/pinfold.toml", "[defaults]\naction = 'allow'\nsandbox = 'w'\n[sandbox.w]\nfs.write.allow = ['.']\n");
    // The ledger inside a writable root: still out of reach.
    let state = w.proj.join("audit");
    w.set("PINFOLD_STATE_DIR", &state.display().to_string());
    let key = w.root.join("keys/ledger.key");
    fs::create_dir_all(key.parent().unwrap()).unwrap();
    w.set("PINFOLD_LEDGER_KEY", &key.display().to_string());
    crate::support::approve_policy(&w.proj.join("pinfold.toml"), &state);
    assert_eq!(w.run(&["audit", "checkpoint"], b"").code, 0);
    assert!(key.exists());
    let before = fs::read(state.join("ledger.jsonl")).unwrap();
    let attack = format!(
        // (`true >`, not `: >`: a failed redirect on a special builtin ends a POSIX shell.)
        "cat {s}/ledger.jsonl\ncat {k}\necho x >> {s}/ledger.jsonl\ntrue > {s}/ledger.jsonl\nrm -f {s}/ledger.checkpoints\nmv {s} {p}/gone\necho forged > {k}\necho done\n",
        s = state.display(),
        k = key.display(),
        p = w.proj.display()
    );
    // From a script, so only the kernel layers stand in the way (the policy sees `sh FILE`).
    fs::write(w.proj.join("attack.sh"), attack).unwrap();
    let o = w.run(&["exec", "--", "sh attack.sh"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.ends_with("done\n"), "the attack did not run to its end: {}{}", o.stdout, o.stderr);
    assert!(!o.stdout.contains("\"hash\""), "the ledger was readable: {}", o.stdout);
    let seed = fs::read_to_string(&key).unwrap();
    assert!(!o.stdout.contains(seed.trim()), "the key was readable");
    let after = fs::read(state.join("ledger.jsonl")).unwrap();
    assert!(after.starts_with(&before), "the ledger was changed from inside");
    assert!(state.join("ledger.checkpoints").exists());
    assert_eq!(fs::read_to_string(&key).unwrap(), seed);
    // exec_start and exec_end were appended after the checkpoint, and the whole chain holds.
    let o = w.run(&["audit", "verify"], b"");
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
}

#[test]
fn a_host_allowlist_runs_through_the_proxy_and_is_recorded_so() {
    let w = World::new();
    w.write(
        "proj/pinfold.toml",
        "[defaults]\naction = 'allow'\nsandbox = 'build'\n[sandbox.build]\nfs.write.allow = ['.']\nnetwork.allow = true\nnetwork.hosts = ['crates.io']\n[sandbox.full]\nnetwork.allow = true\n", // address-literal: never connected (dry runs only: nothing runs)
    );
    let plan = |args: &[&str]| {
        let o = w.run(args, b"");
        assert_eq!(o.code, 0, "{}", o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        (v["plan"]["network"].as_str().unwrap().to_string(), o.stderr)
    };
    let (net, err) = plan(&["exec", "--dry-run", "--", "cargo fetch"]);
    assert_eq!(net, "proxy");
    assert!(err.is_empty(), "{err}");
    // The dry run's record names the allowlist it would enforce.
    let recs = w.records();
    let last = recs.last().unwrap();
    assert_eq!(last["data"]["sandbox"]["network"], "proxy", "{last}");
    assert_eq!(last["data"]["sandbox"]["hosts"], serde_json::json!(["crates.io"]), "{last}"); // address-literal: never connected (the recorded allowlist)
    // Full network when the preset says so without hosts, or when asked for; none when asked.
    assert_eq!(plan(&["exec", "--dry-run", "--sandbox", "full", "--", "cargo fetch"]).0, "on");
    assert_eq!(plan(&["exec", "--dry-run", "--net", "on", "--", "cargo fetch"]).0, "on");
    assert_eq!(plan(&["exec", "--dry-run", "--net", "off", "--", "cargo fetch"]).0, "off");
}

/// The fsync policy (record.rs, docs/ledger.md), observed with strace: a `check` or `hook`
/// record is not synced on its own, nor is `exec_end`; `exec_start` is; `PINFOLD_LEDGER_FSYNC=1`
/// syncs every record, `=0` none.
#[test]
fn exec_records_are_synced_checks_are_not_unless_asked() {
    let mut w = World::new();
    w.write("proj/pinfold.toml", "extends = ['pinfold:default']\n[[rules]]\nallow = 'sh *'\n");
    // Create the ledger first (its first records start the checkpoint clock and sync).
    assert_eq!(w.run(&["check", "--", "ls"], b"").code, 0);
    let syncs = |w: &World, args: &[&str]| -> usize {
        let log = w.root.join("strace.log");
        let mut full = vec!["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync", "-o"];
        let log_s = log.display().to_string();
        full.push(&log_s);
        full.push(BIN);
        full.extend_from_slice(args);
        let o = w.run_program(&full);
        assert!(matches!(o.code, 0 | 10), "{args:?}: {}", o.stderr);
        fs::read_to_string(&log).unwrap().lines().filter(|l| l.contains("fdatasync(") || l.contains("fsync(")).count()
    };
    assert_eq!(syncs(&w, &["check", "--", "ls"]), 0);
    let p = w.claude("s", "Bash", json!({"command": "ls"}));
    fs::write(w.root.join("payload.json"), p.to_string()).unwrap();
    // The first hook creates its token key (synced); the decisions after it are not.
    syncs(&w, &["hook", "claude-code"]);
    assert_eq!(syncs(&w, &["hook", "claude-code"]), 0);
    assert_eq!(syncs(&w, &["exec", "--", "sh -c true"]), 1);
    w.set("PINFOLD_LEDGER_FSYNC", "1");
    assert_eq!(syncs(&w, &["check", "--", "ls"]), 1);
    assert_eq!(syncs(&w, &["exec", "--", "sh -c true"]), 2);
    w.set("PINFOLD_LEDGER_FSYNC", "0");
    assert_eq!(syncs(&w, &["exec", "--", "sh -c true"]), 0);
    w.verify();
}
