//! The world of the tests that drive `pinfold check`, `hook`, `init`, `doctor` and `import`
//! without the sandbox suites' users and controls: a temporary directory with a home and a
//! project, agents' payloads, and a run that feeds stdin and collects the output.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// What one run of a program produced.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A temporary directory and its canonical path (what the binary sees through
/// `current_dir`), holding `home/.config` and a project `proj` whose `.git` has a `HEAD` and
/// `hooks/`: enough for pinfold to see a repository.
pub fn temp_project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().canonicalize().unwrap();
    fs::create_dir_all(root.join("home/.config")).unwrap();
    fs::create_dir_all(root.join("proj/.git/hooks")).unwrap();
    fs::write(root.join("proj/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    (dir, root)
}

/// Spawn `c` with pipes, write `stdin` from a thread (a program that stops reading at its
/// limit refuses the rest, which is not the test's failure), wait: exit code, stdout, stderr.
pub fn output(mut c: Command, stdin: &[u8]) -> Out {
    c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // A binary this test process just copied may still be open for writing in a child
    // another test thread is forking (until that child's exec closes it): exec then
    // fails with ETXTBSY for a moment.
    let mut tries = 0;
    let mut child = loop {
        match c.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.expect("spawn"),
        }
    };
    let mut si = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let w = std::thread::spawn(move || {
        let _ = si.write_all(&data);
    });
    let o = child.wait_with_output().expect("wait");
    let _ = w.join();
    Out {
        code: o.status.code().expect("an exit code"),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// Each agent's payload for a shell command run in `cwd`.
pub fn shell_payload(agent: &str, command: &str, cwd: &Path) -> Value {
    match agent {
        "claude-code" | "codex" => json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}, "cwd": cwd}),
        "gemini" => json!({"session_id": "s", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": command}, "cwd": cwd}),
        "cursor" => json!({"conversation_id": "s", "hook_event_name": "beforeShellExecution", "command": command, "cwd": cwd}),
        "copilot" => json!({"toolName": "bash", "toolArgs": json!({"command": command}).to_string(), "cwd": cwd}),
        _ => unreachable!(),
    }
}
