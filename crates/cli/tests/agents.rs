//! `pinfold hook codex|gemini|cursor|copilot`, `pinfold init` and `pinfold import claude-code`:
//! recorded payloads with each agent's real field names (see docs/hooks.md for the sources),
//! fail-closed answers, idempotent installs, and the import mapping.
//!
//! Each test runs the real binary in its own temporary world. Snapshots redact the temporary
//! directory (`[TMP]`), the binary's path (`pinfold`) and tokens (`<token>`). Update them with
//! `INSTA_UPDATE=always cargo test -p pinfold --test integration agents::`, then read every
//! changed `.snap`.

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use insta::assert_snapshot;
use serde_json::{json, Value};

use crate::support::hook::{Out, output, temp_project};
use crate::support::{AGENTS, BIN};

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    proj: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = temp_project();
        World { _dir: dir, home: root.join("home"), proj: root.join("proj"), root }
    }

    /// Write a project file; a policy file is approved, as its author would (`pinfold trust`).
    fn put(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.proj.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        crate::support::approve_policy(&p, &self.root.join("state/pinfold"));
        p
    }

    fn run(&self, args: &[&str], stdin: &[u8]) -> Out {
        let mut c = Command::new(BIN);
        c.args(args);
        self.spawn(c, stdin)
    }

    /// Shell text run by bash in the project, as an agent runs a command.
    fn bash(&self, text: &str) -> Out {
        let mut c = Command::new("bash");
        c.args(["-c", text]);
        self.spawn(c, b"")
    }

    fn spawn(&self, mut c: Command, stdin: &[u8]) -> Out {
        c.current_dir(&self.proj)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("PINFOLD_CACHE_DIR", self.root.join("cache"))
            .env_remove("PINFOLD_NO_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("CODEX_HOME")
            .env_remove("COPILOT_HOME")
            .env_remove("PINFOLD_HOOK_ORIGIN");
        output(c, stdin)
    }

    fn hook(&self, agent: &str, payload: &Value) -> Out {
        self.run(&["hook", agent], payload.to_string().as_bytes())
    }

    fn redact(&self, s: &str) -> String {
        let quoted = format!("'{BIN}'");
        let s = s.replace(&quoted, "pinfold").replace(BIN, "pinfold").replace(&target_dir(), "[TARGET]").replace(self.root.to_str().unwrap(), "[TMP]");
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find("PINFOLD_HOOK_ORIGIN=") {
            let start = i + "PINFOLD_HOOK_ORIGIN=".len();
            out.push_str(&rest[..start]);
            out.push_str("<token>");
            let end = rest[start..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '.')).map_or(rest.len(), |e| start + e);
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    fn show(&self, o: &Out) -> String {
        let mut s = format!("exit: {}\n", o.code);
        if !o.stdout.is_empty() {
            let pretty = serde_json::from_str::<Value>(&o.stdout).map(|v| serde_json::to_string_pretty(&v).unwrap()).unwrap_or(o.stdout.clone());
            s.push_str(&format!("--- stdout\n{}\n", self.redact(&pretty)));
        }
        if !o.stderr.is_empty() {
            s.push_str(&format!("--- stderr\n{}", self.redact(&o.stderr)));
        }
        s
    }

    fn cases(&self, agent: &str, cases: Vec<(&str, Value)>) -> String {
        let mut s = String::new();
        for (what, payload) in cases {
            let o = self.hook(agent, &payload);
            s.push_str(&format!("=== {what}\n{}\n", self.show(&o)));
        }
        s
    }
}

/// The cargo target directory the binary under test was built in.
fn target_dir() -> String {
    let bin = std::path::Path::new(BIN);
    bin.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file()).unwrap_or(bin).to_str().unwrap().to_string()
}

/// A policy where `wc` runs sandboxed, `cat`/`echo` unsandboxed, `git push` asks.
fn policy(w: &World) {
    w.put(
        "pinfold.toml",
        r#"[defaults]
action = "ask"
sandbox = "workspace"

[[rules]]
allow = "cat|echo|ls *"

[[rules]]
allow = "wc *"
sandbox = "readonly"

[[rules]]
ask = "git push *"

[[rules]]
deny = "rm -r|-R|--recursive *"

[sandbox.workspace]
fs.write.allow = ["."]
fs.write.deny = [".git/hooks", ".git/config", "pinfold.toml"]
fs.read.deny = ["secret.txt", "~/.ssh"]

[sandbox.readonly]
fs.write.allow = []
"#,
    );
}

// ---------------------------------------------------------------------------------------------
// Codex
// ---------------------------------------------------------------------------------------------

fn codex(w: &World, tool: &str, input: Value) -> Value {
    // As Codex's hook runtime writes it (codex-rs/hooks PreToolUseCommandInput).
    json!({
        "session_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
        "turn_id": "0199a213-81c0-7800-8aa1-bbab2a035a54",
        "transcript_path": w.home.join(".codex/sessions/2026/01/01/rollout.jsonl"),
        "cwd": w.proj,
        "hook_event_name": "PreToolUse",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": "call_x1Y2z3"
    })
}

#[test]
fn codex_payloads() {
    let w = World::new();
    policy(&w);
    let patch_ok = "*** Begin Patch\n*** Add File: src/new.rs\n+fn main() {}\n*** End Patch\n";
    let patch_hook = "*** Begin Patch\n*** Update File: src/lib.rs\n*** Move to: .git/hooks/pre-commit\n@@\n-a\n+b\n*** End Patch\n";
    let s = w.cases(
        "codex",
        vec![
            ("Bash allowed, one part sandboxed", codex(&w, "Bash", json!({"command": "cat a.txt | wc -l"}))),
            ("Bash allowed, nothing to sandbox: allow + the same command", codex(&w, "Bash", json!({"command": "echo hi"}))),
            ("Bash ask becomes deny", codex(&w, "Bash", json!({"command": "git push origin main"}))),
            ("Bash deny", codex(&w, "Bash", json!({"command": "rm -rf build"}))),
            ("apply_patch inside the project: no opinion", codex(&w, "apply_patch", json!({"command": patch_ok}))),
            ("apply_patch moving a file into .git/hooks", codex(&w, "apply_patch", json!({"command": patch_hook}))),
            ("apply_patch without file lines", codex(&w, "apply_patch", json!({"command": "garbage"}))),
            ("MCP tool: no opinion", codex(&w, "mcp__fs__read", json!({"path": "/etc/passwd"}))),
        ],
    );
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------------
// Gemini CLI
// ---------------------------------------------------------------------------------------------

fn gemini(w: &World, tool: &str, input: Value) -> Value {
    json!({
        "session_id": "8c3f2d10-5b7e-4a51-9d0e-6f2b1c7a9e30",
        "transcript_path": w.home.join(".gemini/tmp/abc/chats/session.json"),
        "cwd": w.proj,
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-01-01T10:30:00.000Z",
        "tool_name": tool,
        "tool_input": input
    })
}

#[test]
fn gemini_payloads() {
    let w = World::new();
    policy(&w);
    fs::create_dir_all(w.proj.join("sub")).unwrap();
    let s = w.cases(
        "gemini",
        vec![
            ("run_shell_command allowed, rewritten", gemini(&w, "run_shell_command", json!({"command": "wc -l a.txt && echo done", "description": "count"}))),
            ("run_shell_command in dir_path", gemini(&w, "run_shell_command", json!({"command": "wc -l a.txt", "dir_path": "sub"}))),
            ("run_shell_command ask becomes deny", gemini(&w, "run_shell_command", json!({"command": "git push"}))),
            ("run_shell_command deny", gemini(&w, "run_shell_command", json!({"command": "rm -r /"}))),
            ("write_file into .git/hooks", gemini(&w, "write_file", json!({"file_path": w.proj.join(".git/hooks/post-checkout"), "content": "x"}))),
            ("replace inside: no opinion", gemini(&w, "replace", json!({"file_path": w.proj.join("src/a.rs"), "old_string": "a", "new_string": "b"}))),
            ("read_file a secret", gemini(&w, "read_file", json!({"file_path": w.proj.join("secret.txt")}))),
            ("search_file_content over the home directory", gemini(&w, "search_file_content", json!({"pattern": "KEY", "dir_path": w.home}))),
            ("web_fetch: no opinion", gemini(&w, "web_fetch", json!({"prompt": "https://example.com"}))), // address-literal: never connected (hook input, judged only)
        ],
    );
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------------
// Cursor
// ---------------------------------------------------------------------------------------------

fn cursor(w: &World, event: &str, fields: Value) -> Value {
    let mut v = json!({
        "conversation_id": "c0ffee00-1111-2222-3333-444455556666",
        "generation_id": "9e1f0a2b-7777-8888-9999-aaaabbbbcccc",
        "model": "claude-4.5-sonnet",
        "hook_event_name": event,
        "cursor_version": "2.1.0",
        "workspace_roots": [w.proj],
        "user_email": "dev@example.com", // address-literal: never connected (hook input field)
        "transcript_path": null
    });
    for (k, x) in fields.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn cursor_payloads() {
    let w = World::new();
    policy(&w);
    let s = w.cases(
        "cursor",
        vec![
            ("preToolUse Shell, rewritten", cursor(&w, "preToolUse", json!({"tool_name": "Shell", "tool_input": {"command": "ls | wc -l", "cwd": w.proj}, "tool_use_id": "tool_1", "cwd": w.proj}))),
            ("preToolUse Shell ask keeps the rewrite", cursor(&w, "preToolUse", json!({"tool_name": "Shell", "tool_input": {"command": "git push"}, "tool_use_id": "tool_2"}))),
            ("preToolUse Shell deny", cursor(&w, "preToolUse", json!({"tool_name": "Shell", "tool_input": {"command": "rm -rf x"}, "tool_use_id": "tool_3"}))),
            ("preToolUse Write .git/config", cursor(&w, "preToolUse", json!({"tool_name": "Write", "tool_input": {"file_path": w.proj.join(".git/config"), "contents": "x"}, "tool_use_id": "tool_4"}))),
            ("preToolUse Read a secret", cursor(&w, "preToolUse", json!({"tool_name": "Read", "tool_input": {"file_path": "secret.txt"}, "tool_use_id": "tool_5"}))),
            ("preToolUse other tool: no opinion", cursor(&w, "preToolUse", json!({"tool_name": "WebSearch", "tool_input": {"query": "x"}, "tool_use_id": "tool_6"}))),
            ("beforeShellExecution, nothing to sandbox", cursor(&w, "beforeShellExecution", json!({"command": "echo hi", "cwd": w.proj}))),
            ("beforeShellExecution, needs a sandbox: deny", cursor(&w, "beforeShellExecution", json!({"command": "wc -l a", "cwd": w.proj}))),
            ("beforeShellExecution ask", cursor(&w, "beforeShellExecution", json!({"command": "git push", "cwd": w.proj}))),
            ("beforeReadFile a secret", cursor(&w, "beforeReadFile", json!({"file_path": w.home.join(".ssh/id_ed25519"), "content": "-----BEGIN", "attachments": []}))),
            ("beforeReadFile a source file", cursor(&w, "beforeReadFile", json!({"file_path": w.proj.join("src/main.rs"), "content": "fn main() {}", "attachments": []}))),
            ("afterFileEdit: no opinion", cursor(&w, "afterFileEdit", json!({"file_path": w.proj.join("a"), "edits": []}))),
        ],
    );
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------------
// Copilot CLI
// ---------------------------------------------------------------------------------------------

fn copilot(w: &World, tool: &str, args: Value) -> Value {
    // The documented camelCase payload; `toolArgs` is a JSON string.
    json!({
        "sessionId": "6d1b2c3a-0000-4000-8000-000000000001",
        "timestamp": 1704614600000u64,
        "cwd": w.proj,
        "toolName": tool,
        "toolArgs": args.to_string()
    })
}

#[test]
fn copilot_payloads() {
    let w = World::new();
    policy(&w);
    let mut object_args = copilot(&w, "bash", json!({}));
    object_args["toolArgs"] = json!({"command": "wc -l a", "description": "count"});
    let s = w.cases(
        "copilot",
        vec![
            ("bash allowed, rewritten", copilot(&w, "bash", json!({"command": "cat a | wc -l", "description": "count lines"}))),
            ("bash with toolArgs as an object", object_args),
            ("bash ask", copilot(&w, "bash", json!({"command": "git push --force"}))),
            ("bash deny", copilot(&w, "bash", json!({"command": "rm -rf dist", "description": "Clean build directory"}))),
            ("edit .git/hooks", copilot(&w, "edit", json!({"path": ".git/hooks/pre-push", "old_str": "a", "new_str": "b"}))),
            ("create inside: no opinion", copilot(&w, "create", json!({"path": "src/new.rs", "file_text": "x"}))),
            ("view a secret", copilot(&w, "view", json!({"path": "secret.txt"}))),
            ("grep the home directory", copilot(&w, "grep", json!({"pattern": "KEY", "path": w.home}))),
            ("web_fetch: no opinion", copilot(&w, "web_fetch", json!({"url": "https://example.com"}))), // address-literal: never connected (hook input, judged only)
        ],
    );
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------------
// Fail closed, per protocol
// ---------------------------------------------------------------------------------------------

#[test]
fn fail_closed_every_agent() {
    let w = World::new();
    let mut s = String::new();
    let big = format!("{{\"padding\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("invalid JSON", b"{\"tool_name\": ".to_vec()),
        ("2 MB input", big.into_bytes()),
        ("empty input", Vec::new()),
    ];
    for agent in ["codex", "gemini", "cursor", "copilot"] {
        for (what, input) in &inputs {
            let o = w.run(&["hook", agent], input);
            assert_eq!(o.stderr.lines().count(), 1, "{agent} {what}: {}", o.stderr);
            match agent {
                // Exit 2 blocks in Codex and Gemini CLI.
                "codex" | "gemini" => {
                    assert_eq!(o.code, 2, "{agent} {what}");
                    assert!(o.stdout.is_empty());
                }
                // Cursor and Copilot let a failed hook through: a deny on stdout, exit 0.
                "cursor" => {
                    assert_eq!(o.code, 0);
                    let v: Value = serde_json::from_str(&o.stdout).unwrap();
                    assert_eq!(v["permission"], "deny", "{agent} {what}");
                }
                _ => {
                    assert_eq!(o.code, 0);
                    let v: Value = serde_json::from_str(&o.stdout).unwrap();
                    assert_eq!(v["permissionDecision"], "deny", "{agent} {what}");
                }
            }
        }
    }
    // Missing fields, a missing directory, a broken policy: one of each per agent.
    let cases: Vec<(&str, &str, Value)> = vec![
        ("codex", "missing tool_input", json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": w.proj})),
        ("codex", "cwd does not exist", json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/nonexistent"})),
        ("gemini", "missing command", json!({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {}, "cwd": w.proj})),
        ("cursor", "missing hook_event_name", json!({"tool_name": "Shell", "tool_input": {"command": "ls"}})),
        ("cursor", "preToolUse Write without a path", json!({"hook_event_name": "preToolUse", "tool_name": "Write", "tool_input": {"contents": "x"}, "cwd": w.proj})),
        ("copilot", "toolArgs not JSON", json!({"toolName": "bash", "toolArgs": "{not json", "cwd": w.proj})),
        ("copilot", "the snake_case payload", json!({"hook_event_name": "PreToolUse", "tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": w.proj})),
    ];
    for (agent, what, payload) in cases {
        s.push_str(&format!("=== {agent}: {what}\n{}\n", w.show(&w.hook(agent, &payload))));
    }
    w.put("pinfold.toml", "[[rules]]\nallow = \n");
    s.push_str(&format!("=== copilot: broken policy\n{}\n", w.show(&w.hook("copilot", &copilot(&w, "bash", json!({"command": "ls"}))))));
    s.push_str(&format!("=== gemini: broken policy\n{}\n", w.show(&w.hook("gemini", &gemini(&w, "run_shell_command", json!({"command": "ls"}))))));
    assert_snapshot!(s);
}

/// The rewritten command from one agent, run by bash: the sandboxed part cannot write outside.
#[test]
fn rewritten_commands_run() {
    let w = World::new();
    w.put(
        "pinfold.toml",
        "[defaults]\naction = \"ask\"\n\n[[rules]]\nallow = \"printf *\"\n\n[[rules]]\nallow = \"touch *\"\nsandbox = \"box\"\n\n[sandbox.box]\nfs.write.allow = [\".\"]\n",
    );
    let outside = w.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let cmd = format!("printf hi > {0}/plain.txt; touch {0}/boxed.txt; touch inside.txt", outside.display());
    for (agent, payload, pick) in [
        ("codex", codex(&w, "Bash", json!({"command": cmd})), "/hookSpecificOutput/updatedInput/command"),
        ("gemini", gemini(&w, "run_shell_command", json!({"command": cmd})), "/hookSpecificOutput/tool_input/command"),
        ("cursor", cursor(&w, "preToolUse", json!({"tool_name": "Shell", "tool_input": {"command": cmd}})), "/updated_input/command"),
        ("copilot", copilot(&w, "bash", json!({"command": cmd})), "/modifiedArgs/command"),
    ] {
        let _ = fs::remove_file(outside.join("plain.txt"));
        let o = w.hook(agent, &payload);
        let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|_| panic!("{agent}: {}", o.stderr));
        let rewritten = v.pointer(pick).and_then(Value::as_str).unwrap_or_else(|| panic!("{agent}: {v}"));
        let r = Command::new("bash").arg("-c").arg(rewritten).current_dir(&w.proj).env("HOME", &w.home).env("XDG_STATE_HOME", w.root.join("state")).env("XDG_CONFIG_HOME", w.home.join(".config")).env("PINFOLD_CACHE_DIR", w.root.join("cache")).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(fs::read_to_string(outside.join("plain.txt")).unwrap_or_default(), "hi", "{agent}: {err}");
        assert!(!outside.join("boxed.txt").exists(), "{agent}: the sandboxed part wrote outside its roots");
        assert!(w.proj.join("inside.txt").exists(), "{agent}: {err}");
        fs::remove_file(w.proj.join("inside.txt")).unwrap();
    }
}

/// Ask with a sandbox, in every agent that can ask (Cursor's `preToolUse`, Copilot CLI): the
/// person approves, the rewritten command runs with bash, and the asked part runs in its
/// sandbox thanks to its token: it writes in the project, not outside its roots; the
/// unsandboxed part around it runs as written; the token copied onto another command is
/// refused. Codex and Gemini CLI cannot ask: the same input is denied, with nothing to run.
/// (Claude Code: `tokens_in_exec` in tests/hook.rs.)
#[test]
fn approved_ask_runs_in_its_sandbox() {
    let w = World::new();
    w.put(
        "pinfold.toml",
        "[defaults]\naction = \"ask\"\n\n[[rules]]\nallow = \"printf *\"\n\n[[rules]]\nallow = \"./mk.sh *\"\nsandbox = \"box\"\n\n[[rules]]\nask = \"./mk.sh *\"\n\n[sandbox.box]\nfs.write.allow = [\".\"]\n",
    );
    // `./mk.sh` runs in `box` (its allow rule) and needs a person (its ask rule: the strictest
    // verdict wins); `printf` runs unsandboxed.
    // mk.sh writes in the project, then tries the path it is given.
    w.put("mk.sh", "#!/bin/sh\ntouch \"made-$2.txt\"\ntouch \"$1\" 2>/dev/null || echo refused\n");
    w.put("other.sh", "#!/bin/sh\ntouch other.txt\n");
    for f in ["mk.sh", "other.sh"] {
        let ok = Command::new("chmod").arg("+x").arg(w.proj.join(f)).status().unwrap();
        assert!(ok.success());
    }
    let outside = w.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let o = outside.display();
    let cmd = |agent: &str| format!("printf hi > {o}/plain-{agent}.txt; ./mk.sh {o}/boxed-{agent}.txt {agent}");

    for (agent, payload, decision_at, pick) in [
        (
            "cursor",
            cursor(&w, "preToolUse", json!({"tool_name": "Shell", "tool_input": {"command": cmd("cursor"), "cwd": w.proj}, "tool_use_id": "tool_7", "cwd": w.proj})),
            "/permission",
            "/updated_input/command",
        ),
        ("copilot", copilot(&w, "bash", json!({"command": cmd("copilot"), "description": "make"})), "/permissionDecision", "/modifiedArgs/command"),
    ] {
        let h = w.hook(agent, &payload);
        assert_eq!(h.code, 0, "{agent}: {}", h.stderr);
        let v: Value = serde_json::from_str(&h.stdout).unwrap_or_else(|_| panic!("{agent}: {}", h.stdout));
        assert_eq!(v.pointer(decision_at).and_then(Value::as_str), Some("ask"), "{agent}: {v}");
        let rewritten = v.pointer(pick).and_then(Value::as_str).unwrap_or_else(|| panic!("{agent}: no rewrite in {v}"));
        // Only the asked part moved into a sandbox; the printf stays in the agent's shell.
        assert_eq!(
            w.redact(rewritten),
            format!(
                "printf hi > [TMP]/outside/plain-{agent}.txt; PINFOLD_HOOK_ORIGIN=<token> pinfold exec --sandbox box -- './mk.sh [TMP]/outside/boxed-{agent}.txt {agent}'"
            ),
            "{agent}"
        );

        // The person approves: the agent runs the rewritten command.
        let r = w.bash(rewritten);
        assert_eq!(r.code, 0, "{agent}: {}", r.stderr);
        assert_eq!(fs::read_to_string(outside.join(format!("plain-{agent}.txt"))).unwrap_or_default(), "hi", "{agent}: the unsandboxed part did not run: {}", r.stderr);
        assert!(w.proj.join(format!("made-{agent}.txt")).exists(), "{agent}: the approved part did not run (or not in the project): {}", r.stderr);
        assert_eq!(r.stdout.trim(), "refused", "{agent}: the approved part ran without its sandbox");
        assert!(!outside.join(format!("boxed-{agent}.txt")).exists(), "{agent}: the sandboxed part wrote outside its roots");
        assert!(!r.stderr.contains("ignoring PINFOLD_HOOK_ORIGIN"), "{agent}: the token was not accepted: {}", r.stderr);

        // The token copied onto another command: refused (exec cannot ask), nothing runs.
        let tok = token_in(rewritten);
        let replay = w.bash(&format!("PINFOLD_HOOK_ORIGIN={tok} {} exec --sandbox box -- ./other.sh", shell_quote(BIN)));
        assert_eq!(replay.code, 126, "{agent}: {}", replay.stderr);
        assert!(replay.stderr.contains("ignoring PINFOLD_HOOK_ORIGIN"), "{agent}: {}", replay.stderr);
        assert!(!w.proj.join("other.txt").exists(), "{agent}: a copied token ran another command");
    }

    // Codex and Gemini CLI cannot ask: the same input is denied, and there is nothing to run.
    for (agent, payload, pick) in [
        ("codex", codex(&w, "Bash", json!({"command": cmd("codex")})), "/hookSpecificOutput/updatedInput"),
        ("gemini", gemini(&w, "run_shell_command", json!({"command": cmd("gemini")})), "/hookSpecificOutput/tool_input"),
    ] {
        let h = w.hook(agent, &payload);
        assert_eq!(h.code, 0, "{agent}: {}", h.stderr);
        let v: Value = serde_json::from_str(&h.stdout).unwrap();
        let decision = v.pointer("/hookSpecificOutput/permissionDecision").or_else(|| v.pointer("/decision"));
        assert_eq!(decision.and_then(Value::as_str), Some("deny"), "{agent}: {v}");
        assert!(v.pointer(pick).is_none(), "{agent}: a denied call carries a command: {v}");
    }
}

/// The token of the first sandboxed piece of a rewritten command.
fn token_in(rewritten: &str) -> String {
    let i = rewritten.find("PINFOLD_HOOK_ORIGIN=").expect("a token") + "PINFOLD_HOOK_ORIGIN=".len();
    rewritten[i..].split(' ').next().unwrap().to_string()
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

// ---------------------------------------------------------------------------------------------
// pinfold init
// ---------------------------------------------------------------------------------------------

#[test]
fn init_every_agent_project_scope_idempotent() {
    let w = World::new();
    // An existing Claude Code file with other settings and another hook, keys unsorted.
    w.put(
        ".claude/settings.json",
        r#"{
  "permissions": {"allow": ["Bash(npm run test:*)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh", "timeout": 5}]}
    ],
    "Stop": []
  },
  "model": "opus",
  "apiKeyHelper": null,
  "cleanupPeriodDays": 1.5e1
}
"#,
    );
    let mut s = String::new();
    for agent in ["claude-code", "codex", "gemini", "cursor", "copilot"] {
        let o = w.run(&["init", "--allow-build-path", "--agent", agent], b"");
        assert_eq!(o.code, 0, "{agent}: {}", o.stderr);
        s.push_str(&format!("=== {agent}\n{}", w.redact(&o.stdout)));
    }
    let files = [".claude/settings.json", ".codex/hooks.json", ".gemini/settings.json", ".cursor/hooks.json", ".github/hooks/pinfold.json"];
    let before: Vec<String> = files.iter().map(|f| fs::read_to_string(w.proj.join(f)).unwrap()).collect();
    // Twice: nothing changes.
    for agent in ["claude-code", "codex", "gemini", "cursor", "copilot"] {
        let o = w.run(&["init", "--allow-build-path", "--agent", agent], b"");
        assert!(o.stdout.contains("already installed"), "{agent}: {}", o.stdout);
    }
    let after: Vec<String> = files.iter().map(|f| fs::read_to_string(w.proj.join(f)).unwrap()).collect();
    assert_eq!(before, after);
    for (f, text) in files.iter().zip(&before) {
        s.push_str(&format!("=== {f}\n{}", w.redact(text)));
    }
    assert_snapshot!(s);
}

#[test]
fn init_updates_a_moved_binary_in_place() {
    let w = World::new();
    w.put(
        ".codex/hooks.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/old/bin/pinfold hook codex"}]}]}}"#,
    );
    let o = w.run(&["init", "--allow-build-path", "--agent", "codex"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&fs::read_to_string(w.proj.join(".codex/hooks.json")).unwrap()).unwrap();
    let groups = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v}");
    let command = w.redact(groups[0]["hooks"][0]["command"].as_str().unwrap());
    assert!(command.starts_with("/bin/sh -c 's=0; \"$1\" hook codex ||") && command.ends_with(" pinfold-hook pinfold"), "{command}");
}

/// Codex reads hooks from `hooks.json` and from inline `[hooks]` tables of the `config.toml` in
/// the same directory, and runs both. pinfold reads config.toml and never writes it.
#[test]
fn init_codex_with_inline_hooks_in_config_toml() {
    let mut s = String::new();
    // pinfold already declared inline (by a binary that moved): nothing written anywhere.
    let w = World::new();
    let toml = "[features]\nhooks = true\n\n[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = \"'/old/bin/pinfold' hook codex\"\n";
    w.put(".codex/config.toml", toml);
    let o = w.run(&["init", "--allow-build-path", "--agent", "codex"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!w.proj.join(".codex/hooks.json").exists(), "hooks.json written although config.toml runs pinfold");
    assert_eq!(fs::read_to_string(w.proj.join(".codex/config.toml")).unwrap(), toml);
    s.push_str(&format!("=== pinfold inline already\n{}\n", w.show(&o)));

    // Other hooks inline: pinfold goes into hooks.json, with a note giving the TOML to move it.
    let w = World::new();
    let toml = "# my hooks\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"./notify.sh\"\n\n[hooks.state.\"x:stop:0:0\"]\nenabled = true\n";
    w.put(".codex/config.toml", toml);
    let o = w.run(&["init", "--allow-build-path", "--agent", "codex"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(w.proj.join(".codex/hooks.json").exists());
    assert_eq!(fs::read_to_string(w.proj.join(".codex/config.toml")).unwrap(), toml);
    s.push_str(&format!("=== other hooks inline\n{}\n", w.show(&o)));

    // Only Codex's own hook state and the feature flag: no inline hooks, no note.
    let w = World::new();
    w.put(".codex/config.toml", "[features]\nhooks = true\n\n[hooks.state.\"x:pre_tool_use:0:0\"]\ntrusted_hash = \"ab12\"\n");
    let o = w.run(&["init", "--allow-build-path", "--agent", "codex"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.lines().all(|l| l.starts_with("pinfold init: WARNING: ")), "{}", o.stderr);
    assert!(w.proj.join(".codex/hooks.json").exists());
    s.push_str(&format!("=== hook state only\n{}\n", w.show(&o)));
    assert_snapshot!(s);
}

#[test]
fn init_refuses_invalid_json_and_detects_agents() {
    let w = World::new();
    let text = "{\n  // a comment\n  \"model\": \"x\"\n}\n";
    w.put(".gemini/settings.json", text);
    let o = w.run(&["init", "--allow-build-path", "--agent", "gemini"], b"");
    assert_eq!(o.code, 2);
    assert_eq!(fs::read_to_string(w.proj.join(".gemini/settings.json")).unwrap(), text, "the file was changed");
    let mut s = format!("=== invalid JSON\n{}\n", w.show(&o));
    // Nothing to detect in a bare project.
    let bare = World::new();
    s.push_str(&format!("=== nothing detected\n{}\n", bare.show(&bare.run(&["init", "--allow-build-path"], b""))));
    // Detection installs for the agents whose directories exist, in the user scope too.
    let w = World::new();
    fs::create_dir_all(w.proj.join(".claude")).unwrap();
    fs::create_dir_all(w.proj.join(".cursor")).unwrap();
    s.push_str(&format!("=== detected in the project\n{}\n", w.show(&w.run(&["init", "--allow-build-path"], b""))));
    fs::create_dir_all(w.home.join(".codex")).unwrap();
    fs::create_dir_all(w.home.join(".copilot")).unwrap();
    s.push_str(&format!("=== detected for the user\n{}\n", w.show(&w.run(&["init", "--allow-build-path", "--scope", "user"], b""))));
    let copilot = fs::read_to_string(w.home.join(".copilot/settings.json")).unwrap();
    s.push_str(&format!("=== ~/.copilot/settings.json\n{}", w.redact(&copilot)));
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------------
// The installed command line fails closed
// ---------------------------------------------------------------------------------------------


/// Where each agent's project settings file keeps pinfold's command.
fn installed_command(w: &World, agent: &str) -> String {
    let (file, event, key) = match agent {
        "claude-code" => (".claude/settings.json", "PreToolUse", "command"),
        "codex" => (".codex/hooks.json", "PreToolUse", "command"),
        "gemini" => (".gemini/settings.json", "BeforeTool", "command"),
        "cursor" => (".cursor/hooks.json", "preToolUse", "command"),
        _ => (".github/hooks/pinfold.json", "preToolUse", "bash"),
    };
    let v: Value = serde_json::from_str(&fs::read_to_string(w.proj.join(file)).unwrap()).unwrap();
    let group = &v["hooks"][event][0];
    let entry = if group["hooks"].is_array() { &group["hooks"][0] } else { group };
    entry[key].as_str().unwrap_or_else(|| panic!("{agent}: no command in {v}")).to_string()
}

/// A payload asking to run `command` in the project, as each agent sends it.
fn shell_call(w: &World, agent: &str, command: &str) -> Value {
    match agent {
        "claude-code" => json!({
            "session_id": "s1", "transcript_path": w.home.join("t.jsonl"), "cwd": w.proj,
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}
        }),
        "codex" => codex(w, "Bash", json!({"command": command})),
        "gemini" => gemini(w, "run_shell_command", json!({"command": command})),
        "cursor" => cursor(w, "preToolUse", json!({"tool_name": "Shell", "tool_input": {"command": command, "cwd": w.proj}, "tool_use_id": "t1", "cwd": w.proj})),
        _ => copilot(w, "bash", json!({"command": command})),
    }
}

/// What the agent makes of a hook's exit status and stdout (docs/hooks.md): `block` (with
/// the decision that blocks), `allow`, or `runs unguarded` for an answer it does not read as
/// a block or a decision (Claude Code, Codex, Gemini CLI: any status but 0 and 2; Copilot
/// CLI: a non-zero status).
fn agent_reads(agent: &str, o: &Out) -> String {
    let decision = |v: &Value| -> Option<String> {
        let d = match agent {
            "claude-code" | "codex" => &v["hookSpecificOutput"]["permissionDecision"],
            "gemini" => &v["decision"],
            "cursor" => &v["permission"],
            _ => &v["permissionDecision"],
        };
        d.as_str().map(str::to_string)
    };
    match (agent, o.code) {
        ("claude-code" | "codex" | "gemini", 2) if !o.stderr.trim().is_empty() => "block (exit 2)".into(),
        ("claude-code" | "codex" | "gemini", 0) | ("cursor" | "copilot", 0) => {
            match serde_json::from_str::<Value>(o.stdout.trim()).ok().as_ref().and_then(decision) {
                Some(d) if d == "deny" => "block (deny on stdout)".into(),
                Some(d) => d,
                None => format!("no decision in {:?}", o.stdout),
            }
        }
        _ => format!("runs unguarded (exit {})", o.code),
    }
}

impl World {
    /// `bin ARGS` in the world (init with another binary than the build's).
    fn run_bin(&self, bin: &std::path::Path, args: &[&str]) -> Out {
        let mut c = Command::new(bin);
        c.args(args);
        self.spawn(c, b"")
    }

    /// `bin hook AGENT` with the call on stdin.
    fn hook_with(&self, bin: &std::path::Path, agent: &str, payload: &Value) -> Out {
        let mut c = Command::new(bin);
        c.args(["hook", agent]);
        self.spawn(c, payload.to_string().as_bytes())
    }

    /// The installed command line run as the agent runs it: `SHELL -c LINE`, the call on stdin.
    fn as_agent(&self, shell: &str, line: &str, payload: &Value) -> Out {
        let mut c = Command::new(shell);
        c.args(["-c", line]);
        self.spawn(c, payload.to_string().as_bytes())
    }
}

/// A copy of pinfold outside the build directory, in a directory whose name has a space, both
/// quotes and a backslash, so that it can be deleted and replaced.
fn pinfold_copy(w: &World) -> PathBuf {
    let dir = w.root.join("opt dir/it's \"x\" a\\b");
    fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("pinfold");
    fs::copy(BIN, &bin).unwrap();
    settle(&bin);
    bin
}

/// Wait until `exe`, just written, can be executed: a child another test thread forked while
/// it was open for writing holds it open until that child's own exec (ETXTBSY meanwhile), and
/// the installed command line would read that as a failure to start.
fn settle(exe: &std::path::Path) {
    for _ in 0..100 {
        match Command::new(exe).arg("--version").output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => std::thread::sleep(std::time::Duration::from_millis(20)),
            _ => return,
        }
    }
}

fn put_script(path: &std::path::Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::remove_file(path);
    fs::write(path, body).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn installed_hook_fails_closed_when_pinfold_cannot_run() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    policy(&w);
    let bin = pinfold_copy(&w);
    for agent in AGENTS {
        let o = w.run_bin(&bin, &["init", "--agent", agent]);
        assert_eq!(o.code, 0, "{agent}: {}", o.stderr);
        assert!(o.stderr.is_empty(), "{agent}: a copy outside the build directory installs without warning: {}", o.stderr);
    }
    let lines: Vec<(&str, String)> = AGENTS.iter().map(|a| (*a, installed_command(&w, a))).collect();

    // The real binary: the agent reads exactly what `pinfold hook AGENT` answers, through sh
    // and bash, for an allowed and a denied command and for input pinfold refuses.
    for (agent, line) in &lines {
        for shell in ["sh", "bash"] {
            for command in ["echo hi", "rm -rf build"] {
                let payload = shell_call(&w, agent, command);
                let direct = w.hook_with(&bin, agent, &payload);
                let wrapped = w.as_agent(shell, line, &payload);
                assert_eq!((wrapped.code, w.redact(&wrapped.stdout)), (direct.code, w.redact(&direct.stdout)), "{agent} via {shell}: {command}\n{}", wrapped.stderr);
                let want = if command == "echo hi" { "allow" } else { "block (deny on stdout)" };
                assert_eq!(agent_reads(agent, &wrapped), want, "{agent} via {shell}: {command}");
            }
            let garbage = json!("not a tool call");
            let direct = w.hook_with(&bin, agent, &garbage);
            let wrapped = w.as_agent(shell, line, &garbage);
            assert_eq!((wrapped.code, wrapped.stdout.clone(), wrapped.stderr.clone()), (direct.code, direct.stdout, direct.stderr), "{agent} via {shell}: pinfold's own refusal passes through");
            assert!(agent_reads(agent, &wrapped).starts_with("block"), "{agent}: {}", agent_reads(agent, &wrapped));
        }
    }

    // pinfold cannot run, or does not finish: every agent blocks the call.
    type Breakage<'a> = (&'a str, Box<dyn Fn() + 'a>, &'a str);
    let breakages: Vec<Breakage> = vec![
        ("binary removed", Box::new(|| fs::remove_file(&bin).unwrap()), "127"),
        (
            "binary not executable",
            Box::new(|| {
                fs::copy(BIN, &bin).unwrap();
                fs::set_permissions(&bin, fs::Permissions::from_mode(0o644)).unwrap();
            }),
            "126",
        ),
        ("binary killed by SIGSEGV", Box::new(|| put_script(&bin, "#!/bin/sh\nkill -SEGV $$\n")), "139"),
        (
            "killed halfway through an allow",
            Box::new(|| {
                put_script(&bin, "#!/bin/sh\nprintf '{\"permission\":\"allow\",\"permissionDecision\":\"allow\"'\nkill -KILL $$\n")
            }),
            "137",
        ),
        ("exits 1 (a non-blocking error)", Box::new(|| put_script(&bin, "#!/bin/sh\nexit 1\n")), "1"),
    ];
    for (what, breakage, status) in &breakages {
        breakage();
        for (agent, line) in &lines {
            for shell in ["sh", "bash"] {
                let o = w.as_agent(shell, line, &shell_call(&w, agent, "echo hi"));
                let read = agent_reads(agent, &o);
                let ctx = format!("{agent} via {shell}, {what}: exit {}\n--- stdout\n{}\n--- stderr\n{}", o.code, o.stdout, o.stderr);
                match *agent {
                    "claude-code" | "codex" | "gemini" => {
                        assert_eq!(read, "block (exit 2)", "{ctx}");
                        assert!(o.stderr.contains(&format!("did not answer (exit status {status}), so the call is blocked")), "{ctx}");
                    }
                    _ => {
                        assert_eq!(read, "block (deny on stdout)", "{ctx}");
                        // Exactly one JSON document: nothing of a half-written answer.
                        let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{e}: {ctx}"));
                        assert!(v.to_string().contains(&format!("exit status {status})")), "{ctx}");
                    }
                }
            }
        }
    }
}

/// Commands in the bare form of earlier releases are pinfold's: `init` rewrites them in place
/// (no second entry), once; `doctor` reports them as failing open until then.
#[test]
fn init_upgrades_bare_commands_in_place() {
    let w = World::new();
    let bin = pinfold_copy(&w);
    let bare = |agent: &str| format!("{} hook {agent}", shell_quote(bin.to_str().unwrap()));
    w.put(".claude/settings.json", &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": bare("claude-code")}]}]}}).to_string());
    w.put(".codex/hooks.json", &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": bare("codex")}]}]}}).to_string());
    w.put(".gemini/settings.json", &json!({"hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"name": "pinfold", "type": "command", "command": bare("gemini")}]}]}}).to_string());
    w.put(
        ".cursor/hooks.json",
        &json!({"version": 1, "hooks": {"preToolUse": [{"command": bare("cursor")}], "beforeReadFile": [{"command": bare("cursor")}], "beforeShellExecution": [{"command": bare("cursor")}]}}).to_string(),
    );
    w.put(".github/hooks/pinfold.json", &json!({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": bare("copilot"), "timeoutSec": 30}]}}).to_string());
    // What the bare form does once the binary is gone: the agents run the call.
    fs::rename(&bin, bin.with_extension("away")).unwrap();
    for agent in AGENTS {
        let o = w.as_agent("sh", &installed_command(&w, agent), &shell_call(&w, agent, "echo hi"));
        assert_eq!(agent_reads(agent, &o), "runs unguarded (exit 127)", "{agent}");
    }
    let doctor = w.run_bin(&bin.with_extension("away"), &["doctor", "--json"]);
    let v: Value = serde_json::from_str(&doctor.stdout).unwrap();
    assert_eq!(doctor.code, 1);
    for agent in AGENTS {
        let row = v["hooks"].as_array().unwrap().iter().find(|h| h["agent"] == agent && h["scope"] == "project").unwrap();
        assert_eq!(row["state"], "unguarded", "{agent}: {row}");
    }
    fs::rename(bin.with_extension("away"), &bin).unwrap();
    for agent in AGENTS {
        let o = w.run_bin(&bin, &["init", "--agent", agent]);
        assert_eq!(o.code, 0, "{agent}: {}", o.stderr);
        assert!(o.stdout.contains(": installed in"), "{agent}: {}", o.stdout);
        let line = installed_command(&w, agent);
        assert!(line.starts_with("/bin/sh -c "), "{agent}: {line}");
        let o = w.run_bin(&bin, &["init", "--agent", agent]);
        assert!(o.stdout.contains("already installed"), "{agent}: {}", o.stdout);
    }
    // One entry each; Cursor's three events all upgraded (beforeShellExecution, where init
    // installs nothing, too).
    let cursor: Value = serde_json::from_str(&fs::read_to_string(w.proj.join(".cursor/hooks.json")).unwrap()).unwrap();
    for ev in ["preToolUse", "beforeReadFile", "beforeShellExecution"] {
        let list = cursor["hooks"][ev].as_array().unwrap();
        assert_eq!(list.len(), 1, "{cursor}");
        assert!(list[0]["command"].as_str().unwrap().starts_with("/bin/sh -c "), "{cursor}");
    }
    let claude: Value = serde_json::from_str(&fs::read_to_string(w.proj.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(claude["hooks"]["PreToolUse"].as_array().unwrap().len(), 1, "{claude}");
    let doctor = w.run_bin(&bin, &["doctor", "--json"]);
    let v: Value = serde_json::from_str(&doctor.stdout).unwrap();
    assert_eq!(v["hooks_ok"], true, "{}", doctor.stdout);
    assert_eq!(doctor.code, if v["supported"] == true { 0 } else { 1 });
}

/// `init` run from a build directory refuses, and installs only with --allow-build-path, with
/// a warning.
#[test]
fn init_refuses_a_build_directory() {
    let w = World::new();
    let o = w.run(&["init", "--agent", "claude-code"], b"");
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(!w.proj.join(".claude/settings.json").exists());
    let mut s = format!("=== refused\n{}\n", w.show(&o));
    let o = w.run(&["init", "--agent", "claude-code", "--allow-build-path"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(w.proj.join(".claude/settings.json").exists());
    s.push_str(&format!("=== --allow-build-path\n{}", w.show(&o)));
    assert_snapshot!(s);
}

/// `pinfold doctor` lists every agent in both scopes: guarded, blocked (binary gone, wrapper
/// refuses), unguarded (bare form, binary gone), fails-open (bare form, binary there),
/// not-installed (the agent's directory exists, no hook anywhere), not-in-use.
#[test]
fn doctor_reports_each_agents_hook() {
    let w = World::new();
    let bin = pinfold_copy(&w);
    let gone = w.root.join("gone/pinfold");
    let wrapped = |agent: &str, exe: &std::path::Path| {
        // The line `init` writes when run as `exe`, taken from a scratch install.
        let scratch = World::new();
        if exe != bin {
            fs::create_dir_all(exe.parent().unwrap()).unwrap();
            fs::copy(&bin, exe).unwrap();
            settle(exe);
        }
        let o = scratch.run_bin(exe, &["init", "--agent", agent]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        if exe != bin {
            fs::remove_file(exe).unwrap();
        }
        installed_command(&scratch, agent)
    };
    let bare = |agent: &str, exe: &std::path::Path| format!("{} hook {agent}", shell_quote(exe.to_str().unwrap()));
    w.put(".claude/settings.json", &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": wrapped("claude-code", &bin)}]}]}}).to_string());
    w.put(".codex/hooks.json", &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": bare("codex", &bin)}]}]}}).to_string());
    fs::create_dir_all(w.home.join(".gemini")).unwrap();
    fs::write(w.home.join(".gemini/settings.json"), json!({"hooks": {"BeforeTool": [{"hooks": [{"type": "command", "command": wrapped("gemini", &gone)}]}]}}).to_string()).unwrap();
    w.put(".cursor/hooks.json", &json!({"version": 1, "hooks": {"beforeShellExecution": [{"command": bare("cursor", &gone)}]}}).to_string());
    fs::create_dir_all(w.home.join(".copilot")).unwrap();
    let o = w.run_bin(&bin, &["doctor"]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    let report = o.stdout.split("agent hooks:").nth(1).expect("an agent hooks section");
    let redacted = report.replace(bin.to_str().unwrap(), "[BIN]").replace(w.root.to_str().unwrap(), "[TMP]");
    assert_snapshot!(redacted);
    let j = w.run_bin(&bin, &["doctor", "--json"]);
    let v: Value = serde_json::from_str(&j.stdout).unwrap();
    let state = |agent: &str, scope: &str| v["hooks"].as_array().unwrap().iter().find(|h| h["agent"] == agent && h["scope"] == scope).unwrap()["state"].as_str().unwrap().to_string();
    assert_eq!(
        [state("claude-code", "project"), state("codex", "project"), state("gemini", "user"), state("cursor", "project"), state("copilot", "user"), state("copilot", "project")],
        ["guarded", "fails-open", "blocked", "unguarded", "not-installed", "not-in-use"]
    );
    assert_eq!(v["hooks_ok"], false);
    // A settings file with comments (Copilot's may have them) that mentions pinfold: doctor
    // cannot read its entries and says so rather than "not installed".
    fs::write(w.home.join(".copilot/settings.json"), "{\n  // pinfold's hook\n  \"hooks\": {}\n}\n").unwrap();
    let j = w.run_bin(&bin, &["doctor", "--json"]);
    let v: Value = serde_json::from_str(&j.stdout).unwrap();
    let row = v["hooks"].as_array().unwrap().iter().find(|h| h["agent"] == "copilot" && h["scope"] == "user").unwrap().clone();
    assert_eq!(row["state"], "unverified", "{row}");
    assert!(row["detail"].as_str().unwrap().contains("is not strict JSON"), "{row}");
}


// ---------------------------------------------------------------------------------------------
// pinfold import claude-code
// ---------------------------------------------------------------------------------------------

// address-literal: never connected (settings imported, not fetched)
#[test]
fn import_claude_code() {
    let w = World::new();
    w.put(
        ".claude/settings.json",
        r#"{"permissions": {
  "allow": ["Bash(npm run test:*)", "Bash(git status)", "Bash(git log *)", "Bash(ls*)", "Bash(git commit -m \"wip\")", "Read(./src/**)", "WebFetch(domain:example.com)"],
  "ask": ["Bash(git push:*)", "Bash(docker * --privileged)"],
  "deny": ["Bash(rm -rf:*)", "Bash(curl * | sh)", "Bash(* --help)", "Read(./.env)", "Bash"]
}}"#,
    );
    w.put(
        ".claude/settings.local.json",
        r#"{"permissions": {"allow": ["Bash(npm run test:*)", "Bash(echo \"a b\")", "Bash(make [all])", "mcp__github__create_issue"]}}"#,
    );
    let o = w.run(&["import", "claude-code"], b"");
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The output is a valid policy, and it judges as Claude Code did.
    w.put("pinfold.toml", &o.stdout);
    let v = w.run(&["validate"], b"");
    assert_eq!(v.code, 0, "{}\n{}", v.stderr, o.stdout);
    let mut s = format!("{}\n=== verdicts\n", o.stdout);
    for cmd in ["npm run test", "npm run test:unit --watch", "git status", "git status -s", "git log --oneline", "lsof", "git push -f", "rm -rf build", "rm -fr build", "ls -la", "docker run --privileged x", "npm run test && rm -rf ~"] {
        let c = w.run(&["check", "--", cmd], b"");
        s.push_str(&format!("{cmd}: {}", c.stdout));
    }
    assert_snapshot!(s);
    // No settings at all: a clear error.
    let bare = World::new();
    let o = bare.run(&["import", "claude-code"], b"");
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("no .claude/settings.json"), "{}", o.stderr);
}
