//! Attacks on the hooks and their file-tool checks, each tried end to end.
//!
//! Each test runs the real binary in its own temporary world and, where the attack aimed at
//! running code outside the sandbox, runs the hook's answer exactly as the agent would
//! (`bash -c` on the rewritten command, in the project) and checks the host afterwards.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::BIN;
use crate::support::hook::shell_payload;

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    proj: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let proj = root.join("proj");
        fs::create_dir_all(home.join(".config")).unwrap();
        fs::create_dir_all(&proj).unwrap();
        let st = Command::new("git").args(["init", "-q"]).current_dir(&proj).status().expect("git");
        assert!(st.success());
        fs::write(proj.join("notes.txt"), "notes\n").unwrap();
        World { _dir: dir, root, home, proj }
    }

    fn env(&self, c: &mut Command) {
        c.current_dir(&self.proj)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("PINFOLD_CACHE_DIR", self.root.join("cache"))
            .env_remove("PINFOLD_NO_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("PINFOLD_HOOK_ORIGIN")
            .env_remove("PINFOLD_HOOK_TIMEOUT_MS");
    }

    /// `pinfold ARGS` with `stdin`; (exit status, stdout, stderr).
    fn pinfold(&self, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
        let mut c = Command::new(BIN);
        c.args(args);
        self.env(&mut c);
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let mut si = child.stdin.take().unwrap();
        let data = stdin.to_vec();
        let w = std::thread::spawn(move || {
            let _ = si.write_all(&data);
        });
        let o = child.wait_with_output().expect("wait");
        let _ = w.join();
        (o.status.code().expect("an exit status"), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    }

    /// Shell text run by bash in the project, as an agent runs a command.
    fn bash(&self, text: &str) {
        let mut c = Command::new("bash");
        c.args(["-c", text]);
        self.env(&mut c);
        let _ = c.output().expect("bash");
    }
}

/// The decision and, when the agent would run something, the command it runs.
fn answer(agent: &str, code: i32, stdout: &str, original: &str) -> (String, Option<String>) {
    if code == 2 {
        return ("block".into(), None);
    }
    assert_eq!(code, 0, "{agent}: a non-blocking failure");
    let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{agent}: {e}: {stdout:?}"));
    let (d, cmd) = match agent {
        "claude-code" | "codex" => (&v["hookSpecificOutput"]["permissionDecision"], &v["hookSpecificOutput"]["updatedInput"]["command"]),
        "gemini" => (&v["decision"], &v["hookSpecificOutput"]["tool_input"]["command"]),
        "cursor" => (&v["permission"], &v["updated_input"]["command"]),
        _ => (&v["permissionDecision"], &v["modifiedArgs"]["command"]),
    };
    let d = d.as_str().unwrap_or("none").to_string();
    let runs = match d.as_str() {
        "deny" | "block" => None,
        _ => Some(cmd.as_str().unwrap_or(original).to_string()),
    };
    (d, runs)
}

/// Text that bash and pinfold's parser would read differently (a `#` bash reads inside a
/// word, a carriage return, a line continuation joined to a word, `$` before a newline, a
/// heredoc delimiter made by a continuation) is never allowed: bash would run, in the agent's
/// own shell, a part the parser did not see. The hook asks (the text cannot be parsed), and
/// whatever an agent runs of the answer writes nothing outside the project.
#[test]
fn text_bash_reads_differently_is_never_allowed_and_runs_nothing_outside() {
    let w = World::new();
    let marker = w.root.join("outside-marker");
    let m = marker.display().to_string();
    let attacks = [
        format!("cat notes.txt\r# ; touch {m}"),
        format!("cat notes.txt\\\n# ; touch {m}"),
        format!("cat notes.txt [ ]# ; touch {m}"),
        format!("{{}}# ; touch {m}"),
        format!("x=\\\n\ntouch cat {m}"),
        format!("cat notes.txt\n\\\ntouch {m}"),
        format!("cat notes.txt <$\ntouch {m}"),
        format!("cat notes.txt >\r\ntouch {m}"),
        format!("cat <<EOF\nhi\nEO\\\nF\ntouch {m}\nEOF\n"),
    ];
    for attack in &attacks {
        // The control: bash alone runs the hidden `touch`.
        let _ = fs::remove_file(&marker);
        w.bash(attack);
        assert!(marker.exists(), "control: bash should run the hidden part of {attack:?}");
        fs::remove_file(&marker).unwrap();

        let (code, _, stderr) = w.pinfold(&["check", "--", attack], b"");
        assert_eq!(code, 10, "check {attack:?}: {stderr}");
        for agent in ["claude-code", "codex", "gemini", "cursor", "copilot"] {
            let payload = shell_payload(agent, attack, &w.proj);
            let (code, stdout, stderr) = w.pinfold(&["hook", agent], payload.to_string().as_bytes());
            let (d, runs) = answer(agent, code, &stdout, attack);
            assert_ne!(d, "allow", "{agent} {attack:?}: {stdout} {stderr}");
            // What an agent would run if a person approved the ask.
            if let Some(cmd) = runs {
                w.bash(&cmd);
                assert!(!marker.exists(), "{agent} {attack:?}: the answer ran the hidden part outside the sandbox: {cmd}");
            }
        }
    }
}

/// A working directory the model chooses for one call (Gemini CLI's `dir_path`, Cursor's
/// `tool_input.cwd`) does not become that call's project: `"/"` would let the sandbox write the
/// whole file system, and a Write with `tool_input.cwd` outside would let the file tool write
/// there. Outside the session's workspace it is refused; inside it works.
#[test]
fn a_model_chosen_directory_outside_the_workspace_is_refused() {
    let w = World::new();
    fs::create_dir_all(w.proj.join("sub")).unwrap();
    let outside = w.root.join("outside");
    fs::create_dir_all(&outside).unwrap();
    let gemini = |dir: &str| {
        let p = json!({"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                       "tool_input": {"command": "ls", "dir_path": dir}, "cwd": w.proj});
        let (code, stdout, stderr) = w.pinfold(&["hook", "gemini"], p.to_string().as_bytes());
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    for dir in ["/", outside.to_str().unwrap(), "..", "../.."] {
        let v = gemini(dir);
        assert_eq!(v["decision"], "deny", "dir_path {dir}: {v}");
        assert!(v["reason"].as_str().unwrap().contains("outside the session's workspace"), "{v}");
    }
    assert_eq!(gemini("sub")["decision"], "allow");

    let cursor = |tool: &str, input: Value| {
        let p = json!({"conversation_id": "s", "hook_event_name": "preToolUse", "tool_name": tool, "tool_input": input,
                       "cwd": w.proj, "workspace_roots": [w.proj]});
        let (code, stdout, stderr) = w.pinfold(&["hook", "cursor"], p.to_string().as_bytes());
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let v = cursor("Shell", json!({"command": format!("touch {}/m", outside.display()), "cwd": "/"}));
    assert_eq!(v["permission"], "deny", "{v}");
    let v = cursor("Write", json!({"file_path": "planted", "contents": "x", "cwd": outside}));
    assert_eq!(v["permission"], "deny", "{v}");
    let v = cursor("Shell", json!({"command": "ls", "cwd": w.proj.join("sub")}));
    assert_eq!(v["permission"], "allow", "{v}");
}

/// A file tool's call holding several path keys (Cursor `file_path` and `target_file`, Gemini
/// `file_path` and `absolute_path`) has every one checked, not only the first.
#[test]
fn every_path_key_of_a_file_tool_is_checked() {
    let w = World::new();
    let bashrc = w.home.join(".bashrc").display().to_string();
    let ssh = w.home.join(".ssh/id_rsa").display().to_string();
    let cursor = |tool: &str, input: Value| {
        let p = json!({"conversation_id": "s", "hook_event_name": "preToolUse", "tool_name": tool, "tool_input": input,
                       "cwd": w.proj, "workspace_roots": [w.proj]});
        let (code, stdout, stderr) = w.pinfold(&["hook", "cursor"], p.to_string().as_bytes());
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    for key in ["path", "target_file"] {
        let v = cursor("Write", json!({"file_path": "x.txt", key: &bashrc, "contents": "x"}));
        assert_eq!(v["permission"], "deny", "Write {key}: {v}");
        let v = cursor("Read", json!({"file_path": "notes.txt", key: &ssh}));
        assert_eq!(v["permission"], "deny", "Read {key}: {v}");
    }
    assert_eq!(cursor("Write", json!({"file_path": "x.txt", "contents": "x"})), json!({}), "one harmless path: no opinion");
    let gemini = |tool: &str, input: Value| {
        let p = json!({"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": tool, "tool_input": input, "cwd": w.proj});
        let (code, stdout, stderr) = w.pinfold(&["hook", "gemini"], p.to_string().as_bytes());
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    assert_eq!(gemini("read_file", json!({"file_path": "notes.txt", "absolute_path": &ssh}))["decision"], "deny");
    assert_eq!(gemini("write_file", json!({"file_path": "x.txt", "absolute_path": &bashrc, "content": "x"}))["decision"], "deny");
    assert_eq!(gemini("list_directory", json!({"dir_path": ".", "path": w.home.join(".ssh")}))["decision"], "deny");
    let v = gemini("run_shell_command", json!({"command": "ls", "dir_path": ".", "directory": "/"}));
    assert_eq!(v["decision"], "deny", "{v}");
}

/// Codex trims each apply_patch line before reading a header, and so does pinfold: an
/// indented `*** Add File: .git/hooks/pre-commit`, which Codex applies, is checked.
#[test]
fn indented_apply_patch_headers_are_checked() {
    let w = World::new();
    for indent in [" ", "\t", "\u{b}", "\u{3000}"] {
        for header in ["Add File: .git/hooks/pre-commit", "Update File: .git/config", "Delete File: .git/config"] {
            let patch = format!("*** Begin Patch\n*** Add File: notes2.txt\n+hi\n{indent}*** {header}\n+x\n*** End Patch\n");
            let p = json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
                           "tool_input": {"command": patch}, "cwd": w.proj});
            let (code, stdout, stderr) = w.pinfold(&["hook", "codex"], p.to_string().as_bytes());
            assert_eq!(code, 0, "{stderr}");
            let v: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
            assert_eq!(v["hookSpecificOutput"]["permissionDecision"], "deny", "{indent:?} {header}: {stdout}");
        }
    }
}

/// The file-tool checks resolve a path as the kernel does: a symlink is followed before `..`
/// applies (`link/../x` is the parent of the link's *target*), and a symlink whose target does
/// not exist is followed too (a write through it creates the target). Either mistake would
/// let a path inside the project reach home.
#[test]
fn file_tool_paths_resolve_as_the_kernel_does() {
    let w = World::new();
    fs::create_dir_all(w.home.join("sub")).unwrap();
    fs::create_dir_all(w.home.join(".ssh")).unwrap();
    fs::write(w.home.join(".ssh/id_rsa"), "key").unwrap();
    fs::write(w.home.join(".bashrc"), "# rc").unwrap();
    std::os::unix::fs::symlink(w.home.join("sub"), w.proj.join("hlink")).unwrap();
    std::os::unix::fs::symlink(w.home.join(".config/autostart/x.desktop"), w.proj.join("dangling")).unwrap();
    let claude = |tool: &str, input: Value| {
        let p = json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "cwd": w.proj});
        let (code, stdout, stderr) = w.pinfold(&["hook", "claude-code"], p.to_string().as_bytes());
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null)
    };
    let deny = |v: &Value| v["hookSpecificOutput"]["permissionDecision"] == "deny";
    // The kernel reads home/.ssh/id_rsa here, and writes home/.bashrc.
    assert!(deny(&claude("Read", json!({"file_path": w.proj.join("hlink/../.ssh/id_rsa")}))));
    assert!(deny(&claude("Write", json!({"file_path": w.proj.join("hlink/../.bashrc"), "content": "x"}))));
    assert!(deny(&claude("Write", json!({"file_path": "hlink/../.bashrc", "content": "x"}))));
    // A write through the dangling link creates home/.config/autostart/x.desktop.
    assert!(deny(&claude("Write", json!({"file_path": w.proj.join("dangling"), "content": "x"}))));
    // Inside the project, the same shapes are fine.
    fs::create_dir_all(w.proj.join("d")).unwrap();
    std::os::unix::fs::symlink(w.proj.join("d"), w.proj.join("plink")).unwrap();
    assert_eq!(claude("Write", json!({"file_path": w.proj.join("plink/../notes2.txt"), "content": "x"})), Value::Null);
}

/// doctor does not say "every installed hook guards its agent" when the settings around
/// pinfold's own entries make the agent skip it: Claude Code's `disableAllHooks`, a matcher
/// that selects no shell tool, a Copilot timeout shorter than pinfold may take.
#[test]
fn doctor_sees_settings_that_switch_the_hook_off() {
    let w = World::new();
    // Install for real (the binary lives under target/, so the build-path check is waived).
    for agent in ["claude-code", "cursor", "copilot"] {
        let (code, _, stderr) = w.pinfold(&["init", "--agent", agent, "--allow-build-path"], b"");
        assert_eq!(code, 0, "{stderr}");
    }
    let state = |agent: &str| {
        let (_, stdout, stderr) = w.pinfold(&["doctor", "--json"], b"");
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
        v["hooks"].as_array().unwrap().iter().filter(|h| h["agent"] == agent && h["scope"] == "project").map(|h| h["state"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert!(state("claude-code").iter().all(|s| s == "guarded"), "{:?}", state("claude-code"));
    let edit = |rel: &str, f: &dyn Fn(&mut Value)| {
        let p = w.proj.join(rel);
        let mut v: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
        f(&mut v);
        fs::write(&p, v.to_string()).unwrap();
    };
    edit(".claude/settings.json", &|v| v["disableAllHooks"] = json!(true));
    assert!(state("claude-code").iter().all(|s| s == "unguarded"), "{:?}", state("claude-code"));
    edit(".claude/settings.json", &|v| {
        v["disableAllHooks"] = json!(false);
        v["hooks"]["PreToolUse"][0]["matcher"] = json!("NeverMatchesAnything");
    });
    assert!(state("claude-code").iter().all(|s| s == "unguarded"), "{:?}", state("claude-code"));
    edit(".cursor/hooks.json", &|v| {
        for e in v["hooks"]["preToolUse"].as_array_mut().unwrap() {
            e["matcher"] = json!("Nothing");
        }
    });
    assert!(state("cursor").iter().any(|s| s == "unguarded"), "{:?}", state("cursor"));
    edit(".github/hooks/pinfold.json", &|v| v["hooks"]["preToolUse"][0]["timeoutSec"] = json!(0.001));
    assert!(state("copilot").iter().all(|s| s == "unguarded"), "{:?}", state("copilot"));
    let (code, _, _) = w.pinfold(&["doctor"], b"");
    assert_eq!(code, 1, "doctor fails while an agent is unguarded");
}
