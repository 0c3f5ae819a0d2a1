//! `pinfold hook claude-code`: recorded Claude Code payloads, the rewrite rules, tokens, and
//! the rewritten commands run for real with `bash -c`.
//!
//! Each test runs the real binary in its own temporary world (`HOME`, `XDG_CONFIG_HOME`,
//! `XDG_STATE_HOME` and the policy cache inside it). Snapshots redact the temporary directory
//! (`[TMP]`), the binary's path (`pinfold`) and tokens (`<token>`). The end-to-end tests need a
//! kernel that can run `pinfold exec` (CI runs them as root).
//!
//! Update snapshots with `INSTA_UPDATE=always cargo test -p pinfold --test integration hook::`,
//! then read every changed `.snap` file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hmac::{Hmac, KeyInit, Mac};
use insta::assert_snapshot;
use serde_json::{json, Value};

use crate::support::BIN;
use crate::support::hook::{Out, output, temp_project};

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    state: PathBuf,
    /// The project: a git repository.
    proj: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = temp_project();
        let home = root.join("home");
        let state = root.join("state");
        let proj = root.join("proj");
        fs::create_dir_all(proj.join(".git/objects")).unwrap();
        fs::create_dir_all(proj.join(".git/refs")).unwrap();
        World { _dir: dir, root, home, state, proj }
    }

    /// Write a project file; a policy file is approved, as its author would (`pinfold trust`).
    fn put(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.proj.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        crate::support::approve_policy(&p, &self.state.join("pinfold"));
        p
    }

    fn env(&self, c: &mut Command) {
        c.current_dir(&self.proj)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", &self.state)
            .env("PINFOLD_CACHE_DIR", self.root.join("cache"))
            .env_remove("PINFOLD_NO_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("PINFOLD_HOOK_ORIGIN");
    }

    fn run(&self, mut c: Command, stdin: &[u8]) -> Out {
        self.env(&mut c);
        output(c, stdin)
    }

    fn hook_raw(&self, stdin: &[u8]) -> Out {
        let mut c = Command::new(BIN);
        c.args(["hook", "claude-code"]);
        self.run(c, stdin)
    }

    /// A recorded Claude Code PreToolUse payload for `tool` with `input`, run in the project.
    fn payload(&self, tool: &str, input: Value) -> Value {
        json!({
            "session_id": "3f1c2a9e-8b1d-4c55-9f7e-2d5c1e0b7a41",
            "transcript_path": self.home.join(".claude/projects/-proj/3f1c2a9e-8b1d-4c55-9f7e-2d5c1e0b7a41.jsonl"),
            "cwd": self.proj,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": input,
            "tool_use_id": "toolu_01ABCDEFGHJKLMNPQRSTUVWX"
        })
    }

    fn hook(&self, tool: &str, input: Value) -> Out {
        self.hook_raw(self.payload(tool, input).to_string().as_bytes())
    }

    /// The hook's answer for a Bash command: (decision, reason, rewritten command).
    fn bash(&self, command: &str) -> (String, String, Option<String>) {
        let o = self.hook("Bash", json!({"command": command, "description": "test"}));
        assert_eq!(o.code, 0, "hook failed: {}", o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).expect("JSON out");
        let h = &v["hookSpecificOutput"];
        (
            h["permissionDecision"].as_str().unwrap().to_string(),
            h["permissionDecisionReason"].as_str().unwrap().to_string(),
            h["updatedInput"]["command"].as_str().map(str::to_string),
        )
    }

    /// Run shell text with `bash -c` in the project, as the agent would.
    fn bash_c(&self, text: &str) -> Out {
        let mut c = Command::new("bash");
        c.args(["-c", text]);
        self.run(c, b"")
    }

    fn exec(&self, token: Option<&str>, args: &[&str]) -> Out {
        let mut c = Command::new(BIN);
        c.arg("exec").args(args);
        self.env(&mut c);
        if let Some(t) = token {
            c.env("PINFOLD_HOOK_ORIGIN", t);
        }
        c.stdin(Stdio::null());
        let o = c.output().unwrap();
        Out { code: o.status.code().unwrap(), stdout: String::from_utf8(o.stdout).unwrap(), stderr: String::from_utf8(o.stderr).unwrap() }
    }

    fn redact(&self, s: &str) -> String {
        let s = s.replace(&pinfold_quoted(), "pinfold").replace(BIN, "pinfold");
        let s = s.replace(self.root.to_str().unwrap(), "[TMP]");
        redact_tokens(&s)
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

    fn key(&self) -> [u8; 32] {
        fs::read(self.state.join("pinfold/hook.key")).expect("hook key").try_into().expect("32 bytes")
    }
}

fn pinfold_quoted() -> String {
    // The hook quotes the binary's path for the shell when it needs quoting.
    let q = format!("'{BIN}'");
    if BIN.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-./=:,+@%^".contains(&b)) { BIN.to_string() } else { q }
}

fn redact_tokens(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
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

/// The token for one piece, as the hook writes it.
fn token_of(rewritten: &str, nth: usize) -> String {
    let i = rewritten.match_indices("PINFOLD_HOOK_ORIGIN=").nth(nth).expect("a token").0 + "PINFOLD_HOOK_ORIGIN=".len();
    rewritten[i..].split(' ').next().unwrap().to_string()
}

/// The token format, written independently of the binary: `v1.<expiry>.<hex HMAC-SHA256>` over
/// length-prefixed (domain, expiry, preset, cwd, text).
fn mint(key: &[u8; 32], expiry: u64, text: &str, preset: &str, cwd: &Path) -> String {
    let mut m = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(key).unwrap();
    let e = expiry.to_string();
    for f in [b"pinfold-hook-origin-v1".as_slice(), e.as_bytes(), preset.as_bytes(), cwd.as_os_str().as_encoded_bytes(), text.as_bytes()] {
        m.update(&(f.len() as u64).to_le_bytes());
        m.update(f);
    }
    let tag = m.finalize().into_bytes();
    format!("v1.{expiry}.{}", tag.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// A policy of two rules: `sandboxed` runs under the `readonly` preset, `plain` without a
/// sandbox (the examples of docs/hooks.md use `wc` and `cat`, each way round).
fn two_rule_policy(w: &World, sandboxed: &str, plain: &str) {
    w.put(
        "pinfold.toml",
        &format!(
            r#"[defaults]
action = "ask"

[[rules]]
allow = "{plain} *"

[[rules]]
allow = "{sandboxed} *"
sandbox = "readonly"

[sandbox.readonly]
fs.write.allow = []
fs.read.deny = ["secret.txt"]
"#
        ),
    );
}

// ---------------------------------------------------------------------------------------------
// Recorded payloads
// ---------------------------------------------------------------------------------------------

#[test]
fn recorded_payloads_default_policy() {
    let w = World::new();
    let mut s = String::new();
    let cases: Vec<(&str, &str, Value)> = vec![
        ("Bash, allowed, one command", "Bash", json!({"command": "git status", "description": "Show working tree status"})),
        ("Bash, compound, extra fields kept", "Bash", json!({"command": "cargo build && cargo test 2>&1 | tail -5", "description": "Build and test", "timeout": 600000, "run_in_background": false})),
        ("Bash, ask", "Bash", json!({"command": "git push origin main", "description": "Push"})),
        ("Bash, deny", "Bash", json!({"command": "rm -rf ~", "description": "Clean up"})),
        ("Bash, cd first", "Bash", json!({"command": "cd build && make", "description": "Build"})),
        ("Write inside the project: no opinion", "Write", json!({"file_path": w.proj.join("src/main.rs"), "content": "fn main() {}\n"})),
        ("Write a git hook", "Write", json!({"file_path": w.proj.join(".git/hooks/pre-commit"), "content": "#!/bin/sh\n"})),
        ("Edit .git/config", "Edit", json!({"file_path": w.proj.join(".git/config"), "old_string": "a", "new_string": "b", "replace_all": false})),
        ("MultiEdit the policy", "MultiEdit", json!({"file_path": w.proj.join("pinfold.toml"), "edits": [{"old_string": "a", "new_string": "b"}]})),
        ("Write outside the project", "Write", json!({"file_path": "/etc/cron.d/x", "content": "x"})),
        ("Write through ..", "Write", json!({"file_path": w.proj.join("src/../../outside.txt"), "content": "x"})),
        ("NotebookEdit inside", "NotebookEdit", json!({"notebook_path": w.proj.join("a.ipynb"), "new_source": "print(1)", "cell_id": "c1", "edit_mode": "replace"})),
        ("Read a key", "Read", json!({"file_path": w.home.join(".ssh/id_ed25519")})),
        ("Read a source file: no opinion", "Read", json!({"file_path": w.proj.join("src/main.rs"), "offset": 1, "limit": 20})),
        ("Read the hook key", "Read", json!({"file_path": w.state.join("pinfold/hook.key")})),
        ("Grep the home directory", "Grep", json!({"pattern": "BEGIN OPENSSH", "path": w.home, "output_mode": "files_with_matches"})),
        ("Grep the project: no opinion", "Grep", json!({"pattern": "fn main", "glob": "*.rs"})),
        ("Glob under ~/.aws", "Glob", json!({"pattern": "**/*", "path": w.home.join(".aws")})),
        ("Glob with an absolute pattern", "Glob", json!({"pattern": format!("{}/.gnupg/*", w.home.display())})),
        ("Other tool: no opinion", "WebFetch", json!({"url": "https://example.com", "prompt": "summarise"})), // address-literal: never connected (hook input, judged only)
    ];
    for (what, tool, input) in cases {
        let o = w.hook(tool, input);
        s.push_str(&format!("=== {what}\n{}\n", w.show(&o)));
    }
    assert_snapshot!(s);
}

#[test]
fn payload_shapes() {
    let w = World::new();
    let mut s = String::new();
    // Only the required fields.
    let minimal = json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": w.proj});
    s.push_str(&format!("=== minimal\n{}\n", w.show(&w.hook_raw(minimal.to_string().as_bytes()))));
    // Unknown extra fields anywhere.
    let mut extra = w.payload("Bash", json!({"command": "ls", "future_field": [1, 2]}));
    extra["model"] = json!({"id": "claude"});
    s.push_str(&format!("=== extra fields\n{}\n", w.show(&w.hook_raw(extra.to_string().as_bytes()))));
    // Another event: no opinion.
    let mut post = w.payload("Bash", json!({"command": "rm -rf ~"}));
    post["hook_event_name"] = json!("PostToolUse");
    s.push_str(&format!("=== PostToolUse\n{}\n", w.show(&w.hook_raw(post.to_string().as_bytes()))));
    assert_snapshot!(s);
}

#[test]
fn fail_closed() {
    let w = World::new();
    let mut s = String::new();
    let big = {
        let mut v = w.payload("Bash", json!({"command": "ls"}));
        v["padding"] = json!("x".repeat(10 * 1024 * 1024));
        v.to_string()
    };
    let no_cmd = w.payload("Bash", json!({"description": "x"})).to_string();
    let mut no_input = w.payload("Bash", json!({}));
    no_input.as_object_mut().unwrap().remove("tool_input");
    let mut bad_cwd = w.payload("Bash", json!({"command": "ls"}));
    bad_cwd["cwd"] = json!("/nonexistent/dir");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("10 MB input", big.into_bytes()),
        ("invalid JSON", b"{\"tool_name\": \"Bash\", \"tool_input\": {\"command\": \"ls\"".to_vec()),
        ("not an object", b"[1,2]".to_vec()),
        ("empty input", Vec::new()),
        ("missing tool_input", no_input.to_string().into_bytes()),
        ("missing command", no_cmd.into_bytes()),
        ("cwd does not exist", bad_cwd.to_string().into_bytes()),
    ];
    for (what, input) in cases {
        let o = w.hook_raw(&input);
        assert_eq!(o.code, 2, "{what}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{what}");
        assert_eq!(o.stderr.lines().count(), 1, "{what}: one line: {}", o.stderr);
        s.push_str(&format!("=== {what}\n{}\n", w.show(&o)));
    }
    // An unreadable policy.
    w.put("pinfold.toml", "[[rules]]\nallow = \n");
    let o = w.hook("Bash", json!({"command": "ls"}));
    assert_eq!(o.code, 2);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    s.push_str(&format!("=== broken policy\n{}\n", w.show(&o)));
    assert_snapshot!(s);
}

// ---------------------------------------------------------------------------------------------
// Rewrite rules
// ---------------------------------------------------------------------------------------------

#[test]
fn issue_examples_exactly() {
    let w = World::new();
    two_rule_policy(&w, "wc", "cat");
    let (d, _, c) = w.bash("cat notes.txt > out.json | wc -l");
    assert_eq!(d, "allow");
    assert_eq!(
        w.redact(&c.unwrap()),
        "cat notes.txt > out.json | PINFOLD_HOOK_ORIGIN=<token> pinfold exec --sandbox readonly -- 'wc -l'"
    );
    let w = World::new();
    two_rule_policy(&w, "cat", "wc");
    let (d, _, c) = w.bash("cat < secret.txt | wc -l");
    assert_eq!(d, "allow");
    assert_eq!(
        w.redact(&c.unwrap()),
        "PINFOLD_HOOK_ORIGIN=<token> pinfold exec --sandbox readonly -- 'cat < secret.txt' | wc -l"
    );
    // The binary is named by its absolute path: PATH cannot swap it.
    assert!(BIN.starts_with('/'));
}

#[test]
fn rewrite_rules() {
    let w = World::new();
    w.put(
        "pinfold.toml",
        r#"[defaults]
action = "ask"

[[rules]]
allow = "cat|echo|cd|export *"

[[rules]]
allow = "wc|grep *"
sandbox = "readonly"

[[rules]]
allow = "make|touch *"
sandbox = "build"

[sandbox.readonly]
fs.write.allow = []

[sandbox.build]
fs.write.allow = ["."]
"#,
    );
    let mut s = String::new();
    for cmd in [
        // Per sub-command: env prefix and redirects move in; operators, subshells stay out.
        "FOO=1 make all > build.log 2>&1 && wc -l build.log",
        "(wc -l a; echo done) | cat",
        "make || touch failed; echo end",
        "! grep -q x f && echo no",
        "wc -l a &\nwc -l b\n",
        // Nothing needs a sandbox.
        "cat a | echo b",
        // (a) unparseable, no default sandbox: never allowed, left as is.
        "wc -l $(",
        // (b) inside another command.
        "echo \"n=`wc -l a`\"",
        "cat <(grep x f)",
        "cat $(echo a)",
        // (c) state-changing builtins, in or out of a sandbox.
        "cd build && make",
        "export X=1; wc -l a",
        "X=a; wc -l $X",
        // (d) a function defined here.
        "f() { wc -l a; }; f",
        // (e) run-time expansion.
        "for x in a b; do wc -l $x; done",
        // (f) a redirect of an enclosing group.
        "{ wc -l; } < secret.txt",
        // The parser attaches a pipeline's last redirect to the whole pipeline: merged.
        "cat a | wc -l > n.txt",
        // Strictest wins leaves nothing writable: allow becomes ask.
        "make | wc -l >/dev/null; cd .",
    ] {
        let (d, r, c) = w.bash(cmd);
        s.push_str(&format!("=== {cmd}\n{d}: {}\n--> {}\n\n", w.redact(&r), c.map_or("(none)".into(), |c| w.redact(&c))));
    }
    assert_snapshot!(s);
}

#[test]
fn unparseable_is_never_allowed() {
    let w = World::new();
    for cmd in ["echo $(", "if then fi", "cat <<EOF", "a\0b"] {
        let (d, _, c) = w.bash(cmd);
        assert_ne!(d, "allow", "{cmd:?}");
        // Under the default policy it is wrapped whole in the default sandbox.
        let c = c.unwrap();
        assert!(c.contains("exec --sandbox workspace -- "), "{c}");
    }
}

// ---------------------------------------------------------------------------------------------
// End to end: the rewritten command, run by bash
// ---------------------------------------------------------------------------------------------

fn e2e_world() -> World {
    let w = World::new();
    w.put(
        "pinfold.toml",
        r#"[defaults]
action = "ask"

[[rules]]
allow = "printf|cd *"

[[rules]]
allow = "touch|cat|wc|make *"
sandbox = "box"

[sandbox.box]
fs.write.allow = ["."]
fs.read.deny = ["secret.txt"]
"#,
    );
    w.put("secret.txt", "0123456789");
    w.put("build/Makefile", "all:\n\tpwd > where.txt\n");
    fs::create_dir_all(w.root.join("outside")).unwrap();
    w
}

#[test]
fn end_to_end_effects_on_disk() {
    let w = e2e_world();
    let out = w.root.join("outside");
    let o = out.display();
    // The unsandboxed printf may write outside the project; the sandboxed touch may not.
    let (d, _, c) = w.bash(&format!("printf hi > {o}/unsandboxed.txt && touch {o}/sandboxed.txt; touch inside.txt"));
    assert_eq!(d, "allow");
    let r = w.bash_c(&c.unwrap());
    assert_eq!(fs::read_to_string(out.join("unsandboxed.txt")).unwrap(), "hi", "{}", r.stderr);
    assert!(!out.join("sandboxed.txt").exists(), "the sandboxed part wrote outside its roots");
    assert!(w.proj.join("inside.txt").exists(), "{}", r.stderr);
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);

    // cd build && make: make runs in build.
    let (d, reason, c) = w.bash("cd build && make");
    assert_eq!(d, "allow", "{reason}");
    let r = w.bash_c(&c.unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(fs::read_to_string(w.proj.join("build/where.txt")).unwrap().trim(), w.proj.join("build").to_str().unwrap());

    // A `< secret.txt` inside the sandbox: read-deny applies to the redirect.
    let (d, _, c) = w.bash("cat < secret.txt | wc -c");
    assert_eq!(d, "allow");
    let c = c.unwrap();
    assert_eq!(
        w.redact(&c),
        "PINFOLD_HOOK_ORIGIN=<token> pinfold exec --sandbox box -- 'cat < secret.txt' | PINFOLD_HOOK_ORIGIN=<token> pinfold exec --sandbox box -- 'wc -c'"
    );
    let r = w.bash_c(&c);
    assert_eq!(r.stdout.trim(), "0", "the secret was read: {}", r.stderr);
    // Merged into one sandbox (the parser gives `> count.txt` to the whole pipeline), the
    // redirect is still opened inside it.
    let (_, _, c) = w.bash("cat < secret.txt | wc -c > count.txt");
    w.bash_c(&c.unwrap());
    assert_eq!(fs::read_to_string(w.proj.join("count.txt")).unwrap().trim(), "0", "the secret was read");
    // The same unsandboxed would have read it.
    let r = w.bash_c("cat < secret.txt | wc -c");
    assert_eq!(r.stdout.trim(), "10");
}

/// The Write tool's check against what the default sandbox really lets a command write: the
/// same answer everywhere but in the toolchain caches, which `pinfold exec` opens to builds
/// and the hook keeps closed to the agent's file tools (docs/hooks.md, "Write tools and the
/// sandbox"). The host's /tmp is closed to both: a sandboxed command gets a private TMPDIR.
#[test]
fn write_check_agrees_with_the_sandbox() {
    let w = World::new();
    w.put("pinfold.toml", "extends = [\"pinfold:default\"]\n\n[[rules]]\nallow = \"touch *\"\n");
    fs::create_dir_all(w.proj.join("src")).unwrap();
    fs::create_dir_all(w.home.join(".cargo/registry/src")).unwrap();
    fs::create_dir_all(w.root.join("outside")).unwrap();
    let host_tmp = std::env::temp_dir().canonicalize().unwrap().join(format!("pinfold-write-check-{}.txt", std::process::id()));
    // (path, may the Write tool write it, may a sandboxed command write it)
    let cases: Vec<(PathBuf, bool, bool)> = vec![
        (w.proj.join("src/new.rs"), true, true),
        (w.proj.join(".git/hooks/pre-commit"), false, false),
        (w.proj.join("pinfold.toml"), false, false),
        (w.home.join(".bashrc"), false, false),
        (w.root.join("outside/x.txt"), false, false),
        (host_tmp.clone(), false, false),
        // The differences. On purpose: the cache is open to builds, not to the agent's edits.
        (w.home.join(".cargo/registry/src/patched.rs"), false, true),
        // A known gap of the sandbox (docs/design/threat-model.md): a policy file in a
        // subdirectory, which would become the policy of calls made from there. The Write
        // tool is refused by name; a sandboxed command can still create one.
        (w.proj.join("src/pinfold.toml"), false, true),
        (w.proj.join("src/pinfold.local.yaml"), false, true),
    ];
    for (path, tool, command) in cases {
        let o = w.hook("Write", json!({"file_path": path, "content": "x"}));
        assert_eq!(o.code, 0, "{}: {}", path.display(), o.stderr);
        let denied = !o.stdout.is_empty();
        if denied {
            let v: Value = serde_json::from_str(&o.stdout).unwrap();
            assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{v}");
        }
        assert_eq!(!denied, tool, "Write {}: {}", path.display(), o.stdout);

        let existed = path.exists();
        let r = w.exec(None, &["--", "touch", path.to_str().unwrap()]);
        let wrote = r.code == 0 && path.exists();
        // Refused by the sandbox, not by the policy (exit 126) or anything else.
        assert!(wrote || r.stderr.contains("touch: cannot touch"), "touch {}: exit {}: {}", path.display(), r.code, r.stderr);
        assert_eq!(wrote, command, "touch {} in the sandbox: exit {}: {}", path.display(), r.code, r.stderr);
        if wrote && !existed {
            fs::remove_file(&path).unwrap();
        }
        assert!(command || !path.exists() || existed, "{} appeared", path.display());
    }
    let _ = fs::remove_file(&host_tmp);
    // The cache's deny says why, and that commands may write there.
    let o = w.hook("Write", json!({"file_path": w.home.join(".cargo/registry/src/patched.rs"), "content": "x"}));
    assert!(w.redact(&o.stdout).contains("is in `[TMP]/home/.cargo/registry`, which the `workspace` sandbox opens to commands"), "{}", o.stdout);
}

#[test]
fn tokens_in_exec() {
    let w = World::new();
    w.put("mk.sh", "#!/bin/sh\ntouch made.txt\ntouch \"$1\" 2>/dev/null || echo refused\n");
    w.put("other.sh", "#!/bin/sh\ntouch other.txt\n");
    for f in ["mk.sh", "other.sh"] {
        Command::new("chmod").arg("+x").arg(w.proj.join(f)).status().unwrap();
    }
    let outside = w.root.join("outside.txt");
    // A program no rule knows (named by its full path: the project's `./` scripts are
    // allowed): ask, rewritten into the default sandbox with a token.
    let other = w.proj.join("other.sh").display().to_string();
    let cmd = format!("{} {}", w.proj.join("mk.sh").display(), outside.display());
    let (d, _, c) = w.bash(&cmd);
    assert_eq!(d, "ask");
    let c = c.unwrap();
    // Without a token exec would refuse (ask): check that first.
    let plain = w.exec(None, &["--sandbox", "workspace", "--", &cmd]);
    assert_eq!(plain.code, 126, "{}", plain.stderr);
    // The person approves: the rewritten command runs, in the sandbox.
    let r = w.bash_c(&c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(w.proj.join("made.txt").exists());
    assert_eq!(r.stdout.trim(), "refused", "the approved command ran without its sandbox");
    assert!(!outside.exists());

    let tok = token_of(&c, 0);
    let mut s = String::new();
    let mut case = |what: &str, token: &str, args: &[&str]| {
        let o = w.exec(Some(token), args);
        // The clock may tick between minting and checking.
        let shown = w.show(&o).replace("expired 3601 s ago", "expired 3600 s ago");
        s.push_str(&format!("=== {what}\n{shown}\n"));
        o.code
    };
    // Replayed on another command, another preset, with a widening option.
    assert_eq!(case("replayed on another command", &tok, &["--sandbox", "workspace", "--", &other]), 126);
    assert_eq!(case("replayed with another preset", &tok, &["--sandbox", "networked", "--", &cmd]), 126);
    assert_eq!(case("replayed with --write", &tok, &["--sandbox", "workspace", "--write", "/", "--", &cmd]), 126);
    // Tampered: one hex digit changed; the expiry pushed back.
    let mut t = tok.clone();
    let last = t.pop().unwrap();
    t.push(if last == '0' { '1' } else { '0' });
    assert_eq!(case("tampered MAC", &t, &["--sandbox", "workspace", "--", &cmd]), 126);
    let parts: Vec<&str> = tok.split('.').collect();
    let later = format!("v1.{}.{}", parts[1].parse::<u64>().unwrap() + 3600, parts[2]);
    assert_eq!(case("tampered expiry", &later, &["--sandbox", "workspace", "--", &cmd]), 126);
    // Expired: a correct MAC, an hour old.
    let key = w.key();
    let old = mint(&key, now() - 3600, &cmd, "workspace", &w.proj);
    assert_eq!(case("expired", &old, &["--sandbox", "workspace", "--", &cmd]), 126);
    // A valid token never lifts a deny.
    let deny = mint(&key, now() + 300, "rm -rf ~", "workspace", &w.proj);
    assert_eq!(case("valid token on a denied command", &deny, &["--sandbox", "workspace", "--", "rm -rf ~"]), 126);
    // From another directory.
    fs::create_dir_all(w.proj.join("sub")).unwrap();
    assert_eq!(case("another cwd", &tok, &["--cwd", "sub", "--sandbox", "workspace", "--", &cmd]), 126);
    assert!(!w.proj.join("other.txt").exists());
    // The test's own minting matches the binary's: a fresh valid token runs.
    let fresh = mint(&key, now() + 300, &other, "workspace", &w.proj);
    assert_eq!(case("valid token minted by the test", &fresh, &["--sandbox", "workspace", "--", &other]), 0);
    assert!(w.proj.join("other.txt").exists());
    assert_snapshot!(s);

    // The key is the user's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(w.state.join("pinfold/hook.key")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mode = fs::metadata(w.state.join("pinfold")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// The hook's decision on a file tool's call: `none` when it has no opinion (no output).
fn file_tool_decision(o: &Out) -> String {
    assert_eq!(o.code, 0, "hook failed: {}", o.stderr);
    if o.stdout.trim().is_empty() {
        return "none".into();
    }
    let v: Value = serde_json::from_str(&o.stdout).expect("JSON out");
    v["hookSpecificOutput"]["permissionDecision"].as_str().unwrap_or("none").to_string()
}

/// A second name (a hard link) of a hidden file, made before the secret was written into it
/// (`ln .env.example notes`, then the user fills `.env.example` in and renames it `.env`): the
/// Read and Grep tools are refused through that name, as `pinfold exec` refuses every run
/// while it exists (found: the hook judged the path alone, and the Read tool returned the
/// secret). A file with a second name that is not hidden stays readable (the control).
#[test]
fn a_hidden_files_other_name_is_not_read_by_the_file_tools() {
    let w = World::new();
    w.put("pinfold.toml", "extends = [\"pinfold:default\"]\n[sandbox.workspace]\nfs.write.allow = [\".\"]\nfs.read.deny = [\".env\", \"~/.ssh\"]\n");
    let env = w.put(".env", "KEY=real-secret\n");
    fs::hard_link(&env, w.proj.join(".cache-notes")).unwrap();
    let plain = w.put("data.txt", "plain\n");
    fs::hard_link(&plain, w.proj.join("data-copy.txt")).unwrap();
    let o = w.hook("Read", json!({"file_path": w.proj.join(".cache-notes")}));
    assert_eq!(file_tool_decision(&o), "deny", "Read of the other name: {}", o.stdout);
    assert!(o.stdout.contains("another name"), "{}", o.stdout);
    // (A search of a directory holding no hidden path: the other name may be anywhere.)
    let src = w.put("src/main.rs", "fn main() {}\n").parent().unwrap().to_path_buf();
    let o = w.hook("Grep", json!({"pattern": "KEY", "path": src}));
    assert_eq!(file_tool_decision(&o), "deny", "Grep while the other name exists: {}", o.stdout);
    assert!(o.stdout.contains("another name"), "{}", o.stdout);
    let o = w.hook("Read", json!({"file_path": w.proj.join("data-copy.txt")}));
    assert_eq!(file_tool_decision(&o), "none", "the control: a linked file that is not hidden: {}", o.stdout);
    // With the other name gone, the search is no longer refused.
    fs::remove_file(w.proj.join(".cache-notes")).unwrap();
    let o = w.hook("Grep", json!({"pattern": "KEY", "path": src}));
    assert_eq!(file_tool_decision(&o), "none", "Grep with the other name gone: {}", o.stdout);
}

/// A link in a hidden directory (`~/.ssh/id_ed25519 -> ~/dotfiles/ssh/id`), and a hidden
/// directory that is itself a link (`~/.gnupg -> dotfiles/gpg`): the Read and Grep tools are
/// refused where they lead, as `pinfold exec` hides it there (found by an outside attack: the
/// hook judged the path alone, and the Read tool returned the key). A file beside them that
/// nothing hidden leads to stays readable (the control).
#[test]
fn what_a_hidden_link_leads_to_is_not_read_by_the_file_tools() {
    let w = World::new();
    let dotfiles = w.root.join("dotfiles");
    for (rel, text) in [("ssh/id", "KEY-ssh\n"), ("gpg/key", "KEY-gpg\n"), ("notes.txt", "plain\n")] {
        fs::create_dir_all(dotfiles.join(rel).parent().unwrap()).unwrap();
        fs::write(dotfiles.join(rel), text).unwrap();
    }
    fs::create_dir_all(w.home.join(".ssh")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("ssh/id"), w.home.join(".ssh/id_ed25519")).unwrap();
    std::os::unix::fs::symlink(dotfiles.join("gpg"), w.home.join(".gnupg")).unwrap();
    for target in [dotfiles.join("ssh/id"), dotfiles.join("gpg/key")] {
        let o = w.hook("Read", json!({"file_path": target}));
        assert_eq!(file_tool_decision(&o), "deny", "Read of {}: {}", target.display(), o.stdout);
        assert!(o.stdout.contains("leads"), "{}", o.stdout);
    }
    let o = w.hook("Grep", json!({"pattern": "KEY", "path": dotfiles}));
    assert_eq!(file_tool_decision(&o), "deny", "Grep of the directory holding the targets: {}", o.stdout);
    let o = w.hook("Read", json!({"file_path": dotfiles.join("notes.txt")}));
    assert_eq!(file_tool_decision(&o), "none", "the control: a file nothing hidden leads to: {}", o.stdout);
}

/// The home directory's files as links into the project (a dotfiles repository: `~/.gitconfig
/// -> proj/gitconfig`, `~/.config/git -> proj/git`, `~/.local/bin/tool -> proj/bin/tool`, and
/// `~/.npmrc` leading to a file not made yet): the Write tool is refused each target, as a
/// control file git, a shell or a toolchain reads outside the sandbox (found by an outside
/// attack: they were writable, and the user's git ran a planted `core.fsmonitor`). A file of
/// the project nothing links to stays writable (the control).
#[test]
fn the_file_tools_do_not_write_where_home_files_lead() {
    let w = World::new();
    w.put("gitconfig", "[user]\n");
    w.put("git/config", "[user]\n");
    w.put("bin/tool", "#!/bin/sh\n");
    fs::create_dir_all(w.home.join(".config")).unwrap();
    fs::create_dir_all(w.home.join(".local/bin")).unwrap();
    std::os::unix::fs::symlink(w.proj.join("gitconfig"), w.home.join(".gitconfig")).unwrap();
    std::os::unix::fs::symlink(w.proj.join("git"), w.home.join(".config/git")).unwrap();
    std::os::unix::fs::symlink(w.proj.join("bin/tool"), w.home.join(".local/bin/tool")).unwrap();
    std::os::unix::fs::symlink(w.proj.join("npmrc"), w.home.join(".npmrc")).unwrap();
    for rel in ["gitconfig", "git/config", "bin/tool", "npmrc"] {
        let o = w.hook("Write", json!({"file_path": w.proj.join(rel), "content": "[core]\n\tfsmonitor = x\n"}));
        assert_eq!(file_tool_decision(&o), "deny", "Write of {rel}: {}", o.stdout);
        assert!(o.stdout.contains("home directory"), "{}", o.stdout);
    }
    let o = w.hook("Write", json!({"file_path": w.proj.join("notes.txt"), "content": "x\n"}));
    assert_ne!(file_tool_decision(&o), "deny", "the control: a project file nothing links to: {}", o.stdout);
}
