//! The hook never fails open: whatever happens while pinfold judges a call — a huge input, a
//! crash, an abort, a hang — the agent gets an answer its protocol reads as a decision, never
//! the exit status it reads as "go ahead" (Claude Code, Codex and Gemini CLI run the call on
//! any status but 0 and 2; Cursor and Copilot CLI on any failure without a deny on stdout).
//!
//! Each test runs the real binary in its own temporary world. A worker is made to hang by a
//! policy that extends a FIFO nobody writes (opening it blocks), the way a policy on a hung
//! network file system would; the test then kills the worker from outside with a real signal.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::hook::{Out, shell_payload, temp_project};
use crate::support::{AGENTS, BIN};

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    proj: PathBuf,
}

impl World {
    fn new() -> World {
        let (dir, root) = temp_project();
        World { _dir: dir, proj: root.join("proj"), root }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .current_dir(&self.proj)
            .env("HOME", self.root.join("home"))
            .env("XDG_CONFIG_HOME", self.root.join("home/.config"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("PINFOLD_CACHE_DIR", self.root.join("cache"))
            .env_remove("PINFOLD_NO_CACHE")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("CODEX_HOME")
            .env_remove("COPILOT_HOME")
            .env_remove("PINFOLD_HOOK_ORIGIN")
            .env_remove("PINFOLD_HOOK_TIMEOUT_MS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn finish(child: Child, stdin: Vec<u8>) -> Out {
        let mut child = child;
        let si = child.stdin.take();
        let w = std::thread::spawn(move || {
            if let Some(mut si) = si {
                let _ = si.write_all(&stdin);
            }
        });
        let o = child.wait_with_output().expect("wait");
        let _ = w.join();
        Out {
            code: o.status.code().unwrap_or_else(|| panic!("killed by a signal: {:?}", o.status)),
            stdout: String::from_utf8(o.stdout).unwrap(),
            stderr: String::from_utf8(o.stderr).unwrap(),
        }
    }

    fn run(&self, mut c: Command, stdin: Vec<u8>) -> Out {
        Self::finish(c.spawn().expect("spawn"), stdin)
    }

    /// A policy whose `extends` names a FIFO: loading it blocks until the process is killed.
    fn hanging_policy(&self) {
        let fifo = self.proj.join("hang.toml");
        let st = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(st.success());
        fs::write(self.proj.join("pinfold.toml"), "extends = [\"pinfold:recommended\", \"./hang.toml\"]\n").unwrap();
    }
}

/// The decision an agent reads from `o`: "allow", "ask", "deny", or "block" for a failure its
/// protocol blocks. Panics on anything the agent would read as a non-blocking failure.
fn decision(agent: &str, o: &Out) -> String {
    let v = || serde_json::from_str::<Value>(&o.stdout).unwrap_or_else(|e| panic!("{agent}: stdout is not JSON ({e}): {:?} / {}", o.stdout, o.stderr));
    match (agent, o.code) {
        ("claude-code" | "codex" | "gemini", 2) => {
            assert!(!o.stderr.is_empty(), "{agent}: a block says why on stderr");
            "block".into()
        }
        ("claude-code" | "codex", 0) => v()["hookSpecificOutput"]["permissionDecision"].as_str().unwrap_or("none").into(),
        ("gemini", 0) => v()["decision"].as_str().unwrap_or("none").into(),
        ("cursor", 0) => v()["permission"].as_str().unwrap_or("none").into(),
        ("copilot", 0) => v()["permissionDecision"].as_str().unwrap_or("none").into(),
        (_, code) => panic!("{agent}: exit {code} is a non-blocking hook failure: the call would run unguarded\nstderr: {}", o.stderr),
    }
}

/// What blocks in `agent`'s protocol.
fn blocks(agent: &str, d: &str) -> bool {
    match agent {
        "claude-code" | "codex" | "gemini" => d == "block" || d == "deny",
        _ => d == "deny",
    }
}

// -------------------------------------------------------------------------------------------
// a command of tens of thousands of arguments
// -------------------------------------------------------------------------------------------

#[test]
fn a_command_of_tens_of_thousands_of_arguments_is_judged_at_every_entry_point() {
    let w = World::new();
    let long_rm = format!("rm -rf ~ {}", "-f ".repeat(30_000).trim_end());
    let long_echo = format!("echo {}", "a ".repeat(30_000).trim_end());

    let o = w.run(w.command(&["check", "--", &long_rm]), Vec::new());
    assert_eq!(o.code, 11, "check: deny\n{}", o.stderr);
    let o = w.run(w.command(&["check", "--", &long_echo]), Vec::new());
    assert_eq!(o.code, 0, "check: allow\n{}", o.stderr);
    let o = w.run(w.command(&["check"]), long_rm.clone().into_bytes());
    assert_eq!(o.code, 11, "check from stdin: deny\n{}", o.stderr);
    let o = w.run(w.command(&["exec", "--", &long_rm]), Vec::new());
    assert_eq!(o.code, 126, "exec: denied, nothing run\n{}", o.stderr);

    for agent in AGENTS {
        let payload = shell_payload(agent, &long_rm, &w.proj);
        let mut c = w.command(&["hook", agent]);
        // The largest budget: a debug build on a busy machine is slow, and a block at the
        // deadline would hide what this test looks for.
        c.env("PINFOLD_HOOK_TIMEOUT_MS", "50000");
        let o = w.run(c, payload.to_string().into_bytes());
        let d = decision(agent, &o);
        assert_eq!(d, "deny", "{agent}: {}", o.stderr);
    }
}

// -------------------------------------------------------------------------------------------
// many commands in one call
// -------------------------------------------------------------------------------------------

/// 100,000 lines of `true` (600 KB of JSON) took 110 s when the rewrite compared every pair
/// of commands; the answer now comes within the hook's budget (the largest one, for debug
/// builds) and runs the input as one sandboxed command.
#[test]
fn a_hundred_thousand_commands_get_an_answer_in_time() {
    let w = World::new();
    let text = "true\n".repeat(100_000);
    let payload = shell_payload("claude-code", &text, &w.proj);
    let mut c = w.command(&["hook", "claude-code"]);
    c.env("PINFOLD_HOOK_TIMEOUT_MS", "50000");
    let o = w.run(c, payload.to_string().into_bytes());
    let d = decision("claude-code", &o);
    let v: Value = serde_json::from_str(&o.stdout).unwrap_or(Value::Null);
    let reason = v["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap_or_default();
    if d == "ask" {
        // A debug build on a loaded machine may pass the parser's own 2 s budget: that is
        // the documented answer to input too slow to parse (on_parse_error), still in time.
        assert!(reason.contains("parsing took longer than"), "{reason}");
        return;
    }
    assert_eq!(d, "allow", "{}", o.stderr);
    let rewritten = v["hookSpecificOutput"]["updatedInput"]["command"].as_str().unwrap();
    assert_eq!(rewritten.matches(" exec --sandbox ").count(), 1, "runs as one sandboxed command");
    assert!(reason.contains("more than pinfold sandboxes one by one"), "{reason}");
}

// -------------------------------------------------------------------------------------------
// a worker that dies or hangs
// -------------------------------------------------------------------------------------------

/// The worker the hook forked, once it exists.
fn worker_of(hook: u32) -> u32 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let children = fs::read_to_string(format!("/proc/{hook}/task/{hook}/children")).unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            return pid.parse().unwrap();
        }
        assert!(Instant::now() < until, "the hook started no worker");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait until `pid` is blocked opening the FIFO (in `openat`, system call 257 on x86-64), so
/// that the kill hits it mid-judgement.
fn wait_blocked(pid: u32) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let syscall = fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if syscall.split_whitespace().next() == Some("257") {
            return;
        }
        assert!(Instant::now() < until, "the worker never blocked opening the FIFO (syscall {syscall:?})");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_worker_killed_by_any_signal_gets_the_blocking_answer() {
    let w = World::new();
    w.hanging_policy();
    for agent in AGENTS {
        for (signal, name) in [(libc::SIGSEGV, "SEGV"), (libc::SIGABRT, "ABRT"), (libc::SIGKILL, "KILL"), (libc::SIGBUS, "BUS")] {
            let payload = shell_payload(agent, "ls", &w.proj);
            let mut h = w.command(&["hook", agent]).spawn().expect("spawn");
            let hook_pid = h.id();
            // Send the payload and close stdin, then find the worker and kill it.
            h.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
            let worker = worker_of(hook_pid);
            wait_blocked(worker);
            let st = Command::new("kill").args([&format!("-{name}"), &worker.to_string()]).status().unwrap();
            assert!(st.success());
            let o = World::finish(h, Vec::new());
            let d = decision(agent, &o);
            assert!(blocks(agent, &d), "{agent} SIG{name}: {d}");
            assert!(o.stderr.contains(&format!("killed by signal {signal}")), "{agent} SIG{name}: {}", o.stderr);
        }
    }
}

#[test]
fn a_worker_that_hangs_gets_the_blocking_answer_at_the_deadline() {
    let w = World::new();
    w.hanging_policy();
    for agent in AGENTS {
        let payload = shell_payload(agent, "ls", &w.proj);
        let mut c = w.command(&["hook", agent]);
        c.env("PINFOLD_HOOK_TIMEOUT_MS", "700");
        let t = Instant::now();
        let o = w.run(c, payload.to_string().into_bytes());
        let took = t.elapsed();
        let d = decision(agent, &o);
        assert!(blocks(agent, &d), "{agent}: {d}");
        assert!(o.stderr.contains("time budget of 700 ms"), "{agent}: {}", o.stderr);
        assert!(took >= Duration::from_millis(700) && took < Duration::from_secs(10), "{agent}: {took:?}");
    }
}

/// An agent that never closes the hook's standard input gets an answer at the deadline too.
#[test]
fn input_that_never_ends_gets_the_blocking_answer_at_the_deadline() {
    let w = World::new();
    for agent in AGENTS {
        let mut c = w.command(&["hook", agent]);
        c.env("PINFOLD_HOOK_TIMEOUT_MS", "500");
        let mut child = c.spawn().expect("spawn");
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"{\"tool_name\": \"Bash\", ").unwrap();
        let o = child.wait_with_output().expect("wait");
        drop(stdin);
        let o = Out { code: o.status.code().expect("an exit code"), stdout: String::from_utf8(o.stdout).unwrap(), stderr: String::from_utf8(o.stderr).unwrap() };
        let d = decision(agent, &o);
        assert!(blocks(agent, &d), "{agent}: {d}");
        assert!(o.stderr.contains("cannot read the hook input"), "{agent}: {}", o.stderr);
    }
}

/// The failure is in the ledger, recorded by the guard after the worker died.
#[test]
fn a_killed_worker_is_recorded() {
    let w = World::new();
    w.hanging_policy();
    let payload = shell_payload("claude-code", "ls", &w.proj);
    let mut c = w.command(&["hook", "claude-code"]);
    c.env("PINFOLD_HOOK_TIMEOUT_MS", "500");
    let o = w.run(c, payload.to_string().into_bytes());
    assert_eq!(o.code, 2, "{}", o.stderr);
    let o = w.run(w.command(&["audit", "show", "--json"]), Vec::new());
    assert_eq!(o.code, 0, "{}", o.stderr);
    let last = o.stdout.lines().filter(|l| l.contains("\"hook\"")).last().expect("a hook record");
    assert!(last.contains("time budget of 500 ms"), "{last}");
    assert!(last.contains("\"decision\":\"deny\""), "{last}");
}

// -------------------------------------------------------------------------------------------
// code hidden in compound-command headers
// -------------------------------------------------------------------------------------------

/// Headers that assign a variable and evaluate it as code: run directly by bash they write
/// outside the project; through the hook's answer, run exactly as Claude Code runs it
/// (`bash -c` in the project), nothing outside the project changes.
#[test]
fn code_hidden_in_headers_runs_only_inside_the_sandbox() {
    let w = World::new();
    let home = w.root.join("home");
    let bashrc = home.join(".bashrc");
    let marker = w.root.join("outside-marker");
    let cmd = format!("touch {}; echo pwned >> {}", marker.display(), bashrc.display());
    let cases = [
        format!("case ${{x:='a[$({cmd})]'}}$((x)) in *) ;; esac"),
        format!("for f in 'a[$({cmd})]'; do case $((f)) in *) ;; esac; done"),
        format!("case ${{x:='$({cmd})'}}${{x@P}} in *) ;; esac"),
        format!("case ${{x:='a[$({cmd})]'}}${{!x}} in *) ;; esac"),
        format!("for y in ${{x:='a[$({cmd})]'}}$((x)); do :; done"),
        format!("if case ${{x:='a[$({cmd})]'}}$((x)) in *) ;; esac; then ls; fi"),
        format!("for ((i=x; i<1; i++)); do :; done"),
    ];
    let bash = |text: &str| {
        let o = Command::new("bash")
            .args(["-c", text])
            .current_dir(&w.proj)
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_STATE_HOME", w.root.join("state"))
            .env("PINFOLD_CACHE_DIR", w.root.join("cache"))
            .env("x", format!("a[$({cmd})]"))
            .output()
            .expect("bash");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    for case in &cases {
        // The control: bash alone runs the hidden command.
        let _ = fs::remove_file(&marker);
        fs::write(&bashrc, "# rc\n").unwrap();
        bash(case);
        assert!(marker.exists(), "control: `{case}` should run its hidden command when bash runs it directly");
        fs::remove_file(&marker).unwrap();
        fs::write(&bashrc, "# rc\n").unwrap();

        let o = w.run(w.command(&["hook", "claude-code"]), shell_payload("claude-code", case, &w.proj).to_string().into_bytes());
        let d = decision("claude-code", &o);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        let reason = v["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap_or_default().to_string();
        assert_eq!(d, "allow", "`{case}`: {reason}");
        let rewritten = v["hookSpecificOutput"]["updatedInput"]["command"].as_str().expect("a rewritten command").to_string();
        assert!(rewritten.contains(" exec --sandbox "), "`{case}` must run in the sandbox: {rewritten}");
        assert!(reason.contains("runs as one"), "`{case}`: {reason}");
        let stderr = bash(&rewritten);
        assert!(!marker.exists(), "`{case}` wrote outside the project through the hook's answer\n{stderr}");
        assert_eq!(fs::read_to_string(&bashrc).unwrap(), "# rc\n", "`{case}` changed ~/.bashrc\n{stderr}");
    }
}

/// Whatever the walker flags or not, the text the rewrite leaves to the agent's own shell
/// holds no expansion: a header with `$…` makes the whole input run as one in the sandbox.
#[test]
fn no_expansion_is_left_to_the_agent_shell() {
    let w = World::new();
    for case in ["case $x in *) ;; esac", "for f in $x; do :; done", "case \"$1\" in a) ls ;; esac", "true # $x"] {
        let o = w.run(w.command(&["hook", "claude-code"]), shell_payload("claude-code", case, &w.proj).to_string().into_bytes());
        assert_eq!(decision("claude-code", &o), "allow", "`{case}`: {}", o.stderr);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        let rewritten = v["hookSpecificOutput"]["updatedInput"]["command"].as_str().expect("a rewritten command");
        let reason = v["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap();
        assert!(rewritten.contains(" exec --sandbox ") && reason.contains("runs as one"), "`{case}`: {rewritten}\n{reason}");
        assert!(reason.contains("the agent's own shell"), "`{case}`: {reason}");
    }
}

/// A compound command that holds no command, only redirects (`case a in esac > FILE`):
/// judged "nothing to run", it was left to the agent's own shell, which opened the files on
/// the host — emptied one, and appended a line of its choosing to `~/.bashrc` through bash's
/// own error message (found by an outside attack). Through the hook's answer, run exactly as
/// Claude Code runs it, the host file and `~/.bashrc` stay as they were; run by bash alone (the
/// control), the file is emptied.
#[test]
fn redirects_of_a_compound_command_with_no_command_run_only_inside_the_sandbox() {
    let w = World::new();
    let home = w.root.join("home");
    let bashrc = home.join(".bashrc");
    let host = w.root.join("hostfile");
    let cases = [
        format!("case a in esac > {}", host.display()),
        format!("case a in b) ;; esac 2>>{} >'/nonexistent/x\ntouch {}'", bashrc.display(), host.display()),
        format!("case a in esac >> {} > {}", bashrc.display(), host.display()),
    ];
    let bash = |text: &str| {
        let o = Command::new("bash").args(["-c", text]).current_dir(&w.proj).env("HOME", &home).env("XDG_STATE_HOME", w.root.join("state")).output().expect("bash");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    fs::create_dir_all(&home).unwrap();
    // The control: bash alone empties the file.
    fs::write(&host, "precious\n").unwrap();
    bash(&cases[0]);
    assert_eq!(fs::read_to_string(&host).unwrap(), "", "control: bash alone empties the file");
    for case in &cases {
        fs::write(&host, "precious\n").unwrap();
        fs::write(&bashrc, "# rc\n").unwrap();
        let o = w.run(w.command(&["hook", "claude-code"]), shell_payload("claude-code", case, &w.proj).to_string().into_bytes());
        assert_eq!(decision("claude-code", &o), "allow", "`{case}`: {}", o.stdout);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        let rewritten = v["hookSpecificOutput"]["updatedInput"]["command"].as_str().expect("a rewritten command").to_string();
        assert!(rewritten.contains(" exec --sandbox "), "`{case}` must run in the sandbox: {rewritten}");
        let stderr = bash(&rewritten);
        assert_eq!(fs::read_to_string(&host).unwrap(), "precious\n", "`{case}` changed a host file through the hook's answer\n{stderr}");
        assert_eq!(fs::read_to_string(&bashrc).unwrap(), "# rc\n", "`{case}` changed ~/.bashrc\n{stderr}");
        // Every agent's answer runs it in the sandbox too.
        for agent in ["codex", "gemini", "cursor", "copilot"] {
            let o = w.run(w.command(&["hook", agent]), shell_payload(agent, case, &w.proj).to_string().into_bytes());
            let d = decision(agent, &o);
            assert!(blocks(agent, &d) || o.stdout.contains(" exec --sandbox "), "{agent}: `{case}` left to the agent's shell: {d} {}", o.stdout);
        }
    }
}

// -------------------------------------------------------------------------------------------
// Standard error that cannot be written
// -------------------------------------------------------------------------------------------

/// Where the hook's standard error goes: a full device, or a pipe nobody reads.
fn broken_stderr(sink: &str) -> Stdio {
    match sink {
        "/dev/full" => fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full").into(),
        "closed pipe" => {
            let (read_end, write_end) = std::io::pipe().expect("pipe");
            // Closed before the hook starts: every write to its stderr fails with EPIPE.
            drop(read_end);
            write_end.into()
        }
        _ => unreachable!(),
    }
}

/// A standard error that cannot be written (full, or a pipe with no reader) loses the reason,
/// never the answer: invalid input, a decision and a worker killed at the deadline each get
/// the agent's answer, not an abort (a failed `eprintln!` panicked, and the panic hook's own
/// `eprintln!` then aborted the process with SIGABRT).
#[test]
fn a_broken_stderr_still_gets_the_agent_its_answer() {
    let w = World::new();
    let hung = World::new();
    hung.hanging_policy();
    for sink in ["/dev/full", "closed pipe"] {
        for agent in AGENTS {
            let cases: [(&World, Vec<u8>, &str); 4] = [
                (&w, b"not json".to_vec(), "block"),
                (&w, shell_payload(agent, "rm -rf ~", &w.proj).to_string().into_bytes(), "deny"),
                // Cursor's beforeShellExecution cannot rewrite: what needs a sandbox is denied.
                (&w, shell_payload(agent, "ls", &w.proj).to_string().into_bytes(), if agent == "cursor" { "deny" } else { "allow" }),
                (&hung, shell_payload(agent, "ls", &hung.proj).to_string().into_bytes(), "block"),
            ];
            for (world, payload, want) in cases {
                let mut c = world.command(&["hook", agent]);
                c.env("PINFOLD_HOOK_TIMEOUT_MS", if std::ptr::eq(world, &hung) { "500" } else { "50000" });
                c.stderr(broken_stderr(sink));
                let o = world.run(c, payload);
                let what = format!("{agent}, stderr {sink}, want {want}: exit {}, stdout {:?}", o.code, o.stdout);
                let got = match (agent, o.code) {
                    ("claude-code" | "codex" | "gemini", 2) => {
                        assert!(o.stdout.is_empty(), "{what}");
                        "block".to_string()
                    }
                    (_, 0) => {
                        let v: Value = serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("{what}: stdout is not JSON: {e}"));
                        let d = match agent {
                            "claude-code" | "codex" => &v["hookSpecificOutput"]["permissionDecision"],
                            "gemini" => &v["decision"],
                            "cursor" => &v["permission"],
                            _ => &v["permissionDecision"],
                        };
                        d.as_str().unwrap_or("none").to_string()
                    }
                    _ => panic!("{what}: a status the agent reads as a non-blocking failure"),
                };
                // Cursor and Copilot CLI are blocked by a deny on stdout.
                let want = if want == "block" && matches!(agent, "cursor" | "copilot") { "deny" } else { want };
                assert_eq!(got, want, "{what}");
            }
        }
    }
}

/// `pinfold exec` refuses with its own status (126) when stderr cannot be written, also when it
/// ignores a hook token that does not verify; it did exit 101 from a panic in `eprintln!`.
/// `check`'s verdict and status do not depend on stderr either.
#[test]
fn a_broken_stderr_keeps_exec_refusals_and_check_verdicts() {
    let w = World::new();
    for sink in ["/dev/full", "closed pipe"] {
        let mut c = w.command(&["exec", "--", "rm -rf ~"]);
        c.stderr(broken_stderr(sink));
        let o = w.run(c, Vec::new());
        assert_eq!(o.code, 126, "exec of a denied command, stderr {sink}");

        let mut c = w.command(&["exec", "--sandbox", "workspace", "--", "git push"]);
        c.env("PINFOLD_HOOK_ORIGIN", "v1.not-a-token").stderr(broken_stderr(sink));
        let o = w.run(c, Vec::new());
        assert_eq!(o.code, 126, "exec of an asked command with a bad token, stderr {sink}");

        let mut c = w.command(&["check", "--", "rm -rf ~"]);
        c.stderr(broken_stderr(sink));
        let o = w.run(c, Vec::new());
        assert_eq!(o.code, 11, "check, stderr {sink}: {}", o.stdout);
        assert!(o.stdout.starts_with("deny: "), "check, stderr {sink}: {}", o.stdout);
    }
}

// -------------------------------------------------------------------------------------------
// The budget against the agents' own hook timeouts
// -------------------------------------------------------------------------------------------

/// `PINFOLD_HOOK_TIMEOUT_MS` above the cap is held to 25 s, and the blocking answer to a worker
/// that hangs, failure record included (at most 1 s more), arrives before Copilot CLI's 30 s
/// hook timeout (the `timeoutSec` `pinfold init` installs), past which Copilot skips the hook
/// and runs the call; the shortest timeout any agent applies to pinfold. A budget of 50 s was
/// allowed, and the record took up to 2 s more. The record is made to take its whole time: the
/// test holds the ledger's lock, so the guard's recording worker waits until it is killed.
#[test]
fn the_largest_budget_answers_within_the_shortest_agent_timeout() {
    let w = World::new();
    // A first decision creates the ledger; then its append lock is held.
    let o = w.run(w.command(&["check", "--", "ls"]), Vec::new());
    assert_eq!(o.code, 0, "{}", o.stderr);
    w.hanging_policy();
    let lock = fs::File::open(w.root.join("state/pinfold/ledger.lock")).expect("the ledger's lock file");
    lock.lock().expect("flock");
    // All five at once: each waits out the whole budget.
    let runs: Vec<_> = AGENTS
        .iter()
        .map(|&agent| {
            let mut c = w.command(&["hook", agent]);
            c.env("PINFOLD_HOOK_TIMEOUT_MS", "600000");
            let started = Instant::now();
            let mut child = c.spawn().expect("spawn");
            // A payload fits in the pipe: written and closed now, not when its turn to be
            // waited for comes.
            let payload = shell_payload(agent, "ls", &w.proj).to_string();
            child.stdin.take().unwrap().write_all(payload.as_bytes()).unwrap();
            (agent, started, child)
        })
        .collect();
    for (agent, started, child) in runs {
        let o = World::finish(child, Vec::new());
        let took = started.elapsed();
        let d = decision(agent, &o);
        assert!(blocks(agent, &d), "{agent}: {d}");
        assert!(o.stderr.contains("time budget of 25000 ms"), "{agent}: {}", o.stderr);
        // The cap and the record's whole 1 s, and under 1 s more for the processes to start
        // and end on a loaded machine (0.2 s measured): well under Copilot's 30 s.
        assert!(took >= Duration::from_secs(26) && took < Duration::from_secs(27), "{agent}: answered after {took:?}");
    }
    drop(lock);
}
