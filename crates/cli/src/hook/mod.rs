//! `pinfold hook <agent>`: answer an agent's pre-tool hook.
//!
//! The agent runs `pinfold hook claude-code` before each tool call with the call as JSON on
//! standard input; pinfold answers allow / ask / deny and rewrites shell commands so that what
//! needs a sandbox runs in one (`rewrite`), carrying a token (`token`) that lets `pinfold exec`
//! run an asked sub-command once a person approved it. See docs/hooks.md.
//!
//! Fail closed: anything unexpected (malformed or oversized input, a missing field, an
//! unreadable policy, an internal error, a panic) gives the answer that blocks the call in that
//! agent's protocol, with one line on stderr: exit 2 for Claude Code, Codex and Gemini CLI (never
//! 1, which they treat as a non-blocking error); a deny on stdout and exit 0 for Cursor and
//! Copilot CLI, which let a failed hook's call through. That line is the only thing a broken
//! stderr (full, or a pipe nobody reads) may cost: nothing on the hook's path panics on a
//! failed write there (`say!`), so the answer is the same.
//!
//! Each agent has a thin adapter (`claude`, `codex`, `gemini`, `cursor`, `copilot`) over the
//! shared `core`.

pub mod agent;
mod claude;
mod codex;
mod copilot;
pub mod core;
mod cursor;
mod gemini;
pub mod init;
pub mod import;
pub mod rewrite;
pub use pinfold_plan::token;
pub mod wrapper;

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use pinfold_sandbox::worker::{self, Ended};
use serde_json::Value;

use pinfold_plan::Error;

/// The most input a hook reads: a tool call is a few kilobytes.
pub const MAX_INPUT: u64 = 1024 * 1024;
/// Exit code for every failure: the agent blocks the call.
pub const FAIL: i32 = 2;

#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(subcommand)]
    agent: Agent,
}

#[derive(Debug, Subcommand)]
enum Agent {
    /// Claude Code's PreToolUse hook: reads the tool call as JSON on stdin, prints the
    /// decision (and the rewritten command) as JSON on stdout.
    ///
    /// Bash commands are judged by the policy found from the call's `cwd`; each part that
    /// needs a sandbox is rewritten to run in `pinfold exec`. Write/Edit/MultiEdit/NotebookEdit
    /// are denied where the default sandbox could not write; Read/Grep/Glob where it could not
    /// read. Other tools: no output. Install in .claude/settings.json (see docs/hooks.md).
    #[command(name = "claude-code", after_help = "Exit status: 0 decided (see stdout), 2 the input or the policy could not be read: the agent blocks the call.")]
    ClaudeCode,
    /// OpenAI Codex CLI's PreToolUse hook (`Bash`, `apply_patch`).
    ///
    /// Allowed commands come back rewritten (`updatedInput`); Codex hooks cannot ask a person,
    /// so what needs confirmation is denied with a reason saying how to allow it. apply_patch
    /// is denied where the default sandbox could not write one of the patched files. Install in
    /// .codex/hooks.json (see docs/hooks.md, or `pinfold init --agent codex`).
    #[command(after_help = "Exit status: 0 decided (see stdout), 2 the input or the policy could not be read: Codex blocks the call.")]
    Codex,
    /// Gemini CLI's BeforeTool hook (`run_shell_command`, `write_file`, `replace`, reads).
    ///
    /// Allowed commands come back rewritten (`hookSpecificOutput.tool_input`); what needs
    /// confirmation is denied with a reason saying how to allow it. Install in
    /// .gemini/settings.json (see docs/hooks.md, or `pinfold init --agent gemini`).
    #[command(after_help = "Exit status: 0 decided (see stdout), 2 the input or the policy could not be read: Gemini CLI blocks the call.")]
    Gemini,
    /// Cursor's hooks: `preToolUse` (rewrites via `updated_input`), `beforeShellExecution`
    /// and `beforeReadFile` (`permission` allow / deny / ask).
    ///
    /// Install in .cursor/hooks.json (see docs/hooks.md, or `pinfold init --agent cursor`).
    #[command(after_help = "Exit status: always 0; a failure answers `{\"permission\":\"deny\"}` on stdout (Cursor lets a failed hook's call through), with the reason on stderr.")]
    Cursor,
    /// GitHub Copilot CLI's preToolUse hook (`toolName`, `toolArgs`; answers
    /// `permissionDecision` and `modifiedArgs`).
    ///
    /// Install in .github/hooks/pinfold.json (see docs/hooks.md, or `pinfold init --agent
    /// copilot`).
    #[command(after_help = "Exit status: always 0; a failure answers `{\"permissionDecision\":\"deny\"}` on stdout (Copilot CLI lets a failed hook's call through), with the reason on stderr.")]
    Copilot,
}

/// How an agent's protocol blocks a call when pinfold fails: exit 2 with the reason on stderr,
/// or (for agents that let a failed hook through) a deny on stdout built from the reason.
#[derive(Clone, Copy)]
enum Fail {
    Exit2,
    Deny(fn(&str) -> String),
}

/// An adapter's answer to a payload: `None` for no opinion.
type Answer = fn(&[u8], &pinfold_plan::Dirs) -> Result<Option<String>, Error>;

/// Each agent: its name, its adapter and how its protocol blocks a call.
const ADAPTERS: [(&str, Answer, Fail); 5] = [
    ("claude-code", claude::answer, Fail::Exit2),
    ("codex", codex::answer, Fail::Exit2),
    ("gemini", gemini::answer, Fail::Exit2),
    ("cursor", cursor::answer, Fail::Deny(cursor::failure)),
    ("copilot", copilot::answer, Fail::Deny(copilot::failure)),
];

/// The answer `agent`'s adapter gives to `input`, in this process: no guard, no ledger
/// record (for the fuzz targets). `None` for an agent pinfold has no adapter for.
pub fn answer_in_process(agent: &str, input: &[u8]) -> Option<Result<Option<String>, String>> {
    let (_, answer, _) = ADAPTERS.iter().find(|a| a.0 == agent)?;
    let out = answer(input, crate::dirs()).map_err(|e| e.one_line());
    core::take_decided();
    Some(out)
}

/// The time budget for a whole answer when `PINFOLD_HOOK_TIMEOUT_MS` does not set one: far
/// above the few milliseconds an answer takes, well below the agents' own hook timeouts
/// (60 s by default in Claude Code and Gemini CLI), past which they let the call through.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);
/// The largest budget `PINFOLD_HOOK_TIMEOUT_MS` may set. A blocking answer after a failure
/// comes at most [`RECORD_BUDGET`] after the budget ends, so 26 s at most: under the shortest
/// hook timeout an agent applies to pinfold, Copilot CLI's 30 s (the `timeoutSec` `pinfold
/// init` installs; past it Copilot skips the hook and runs the call), with room for the
/// process to start and end on a loaded machine. Claude Code and Gemini CLI default to 60 s.
pub const MAX_BUDGET: Duration = Duration::from_secs(25);
/// How long the guard may spend recording a failure in the ledger once the worker failed: the
/// record is given up, not the answer, past it.
pub const RECORD_BUDGET: Duration = Duration::from_secs(1);
/// The worker's address-space limit: a 1 MiB input of 100,000 commands peaks near 0.6 GiB.
const WORKER_MEMORY: u64 = 4 << 30;
/// The largest answer the guard passes on: an answer quotes at most the input a few times.
const MAX_ANSWER: usize = 16 << 20;

/// `pinfold hook <agent>`: a guard and a worker. The guard reads the payload within the time
/// budget and forks a worker ([`pinfold_sandbox::worker`]) that judges, records and writes
/// the answer; the guard passes that answer on only when the worker exited as the agent's
/// protocol expects (0, or [`FAIL`]). A worker that crashed, aborted, ran out of stack or
/// memory, or had not answered by the deadline gets the agent's blocking answer from the
/// guard instead: no failure of the judging code can end the hook with a status the agent
/// reads as "go ahead".
pub fn run(args: HookArgs, dirs: &pinfold_plan::Dirs) -> Result<i32, Error> {
    let name = match args.agent {
        Agent::ClaudeCode => "claude-code",
        Agent::Codex => "codex",
        Agent::Gemini => "gemini",
        Agent::Cursor => "cursor",
        Agent::Copilot => "copilot",
    };
    let Some(&(agent, answer, fail)) = ADAPTERS.iter().find(|a| a.0 == name) else {
        unreachable!("every agent has an adapter");
    };
    // A panic is an internal error: fail closed, not with Rust's 101 (the worker inherits
    // this hook with the fork).
    std::panic::set_hook(Box::new(move |info| {
        let msg = format!("internal error: {}", info.to_string().replace('\n', " "));
        std::process::exit(failed(fail, &msg));
    }));
    let budget = budget();
    let deadline = Instant::now() + budget;
    let input = match worker::read_stdin(MAX_INPUT as usize, deadline) {
        Ok(Some(input)) => Ok(input),
        Ok(None) => Err(Error::new(format!("hook input over {MAX_INPUT} bytes; refusing it"))),
        Err(e) => Err(Error::new("cannot read the hook input").cause(e)),
    };
    let limits = worker::Limits { deadline, memory: WORKER_MEMORY, max_output: MAX_ANSWER };
    let judged = match &input {
        Ok(input) => worker::run(|| decide(agent, answer, fail, input, dirs), &limits),
        Err(e) => Err(std::io::Error::other(e.one_line())),
    };
    let why = match judged {
        Ok(Ended::Exited { code, output }) if code == crate::exit::OK || code == FAIL => {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            if o.write_all(&output).and_then(|()| o.flush()).is_err() {
                say!("pinfold hook: cannot write the decision");
                return Ok(FAIL);
            }
            return Ok(code);
        }
        Ok(Ended::Exited { code, .. }) => format!("the judging process exited with status {code}"),
        Ok(Ended::Signalled { signal }) => {
            let what = match signal {
                libc::SIGSEGV => " (SIGSEGV: an invalid memory access or an exhausted stack)",
                libc::SIGABRT => " (SIGABRT: an abort, or memory exhausted)",
                libc::SIGKILL => " (SIGKILL)",
                _ => "",
            };
            format!("the judging process was killed by signal {signal}{what}")
        }
        Ok(Ended::TimedOut) => format!(
            "no answer within the hook's time budget of {} ms (PINFOLD_HOOK_TIMEOUT_MS)",
            budget.as_millis()
        ),
        Ok(Ended::TooMuchOutput) => format!("the answer is larger than {MAX_ANSWER} bytes"),
        Err(e) if input.is_err() => e.to_string(),
        Err(e) => format!("cannot start the judging process: {e}"),
    };
    // Record the failure when the ledger can take it, in a worker of its own: whatever
    // happens there, the answer below is the blocking one.
    let record_limits = worker::Limits { deadline: Instant::now() + RECORD_BUDGET, ..limits };
    let _ = worker::run(
        || {
            let payload: Value = input.as_deref().ok().and_then(|i| serde_json::from_slice(i).ok()).unwrap_or(Value::Null);
            let audit = pinfold_policy::config::Audit { enabled: true, redact_env: Vec::new() };
            match record(dirs, agent, &payload, &audit, serde_json::json!({}), None, Some(&why)) {
                Ok(()) => 0,
                Err(_) => 1,
            }
        },
        &record_limits,
    );
    Ok(failed(fail, &why))
}

/// The hook's time budget: `PINFOLD_HOOK_TIMEOUT_MS` (milliseconds, up to [`MAX_BUDGET`]),
/// else [`DEFAULT_BUDGET`].
fn budget() -> Duration {
    std::env::var("PINFOLD_HOOK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(DEFAULT_BUDGET, |ms| Duration::from_millis(ms).min(MAX_BUDGET))
}

/// The worker: answer the call, record the decision, write the answer; the exit status.
fn decide(agent: &str, answer: Answer, fail: Fail, input: &[u8], dirs: &pinfold_plan::Dirs) -> i32 {
    let mut out = answer(input, dirs);
    // The decision goes to the ledger before the agent hears it; if it cannot, the call is
    // blocked (see record.rs). A failure is recorded too, when the ledger can take it.
    let decided = core::take_decided();
    let payload: Value = serde_json::from_slice(input).unwrap_or(Value::Null);
    let recorded = match (&out, decided) {
        (Ok(answer), Some(d)) => record(dirs, agent, &payload, &d.audit, d.data, answer.as_deref(), None),
        (Ok(_), None) => Ok(()),
        (Err(e), d) => {
            let (audit, data) = match d {
                Some(d) => (d.audit, d.data),
                None => (pinfold_policy::config::Audit { enabled: true, redact_env: Vec::new() }, serde_json::json!({})),
            };
            let failure = e.one_line();
            if let Err(r) = record(dirs, agent, &payload, &audit, data, None, Some(&failure)) {
                out = Err(Error::new(format!("{failure}; and {}", r.one_line())));
            }
            Ok(())
        }
    };
    if let Err(e) = recorded {
        out = Err(e);
    }
    match out {
        Ok(Some(json)) => {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            if writeln!(o, "{json}").and_then(|()| o.flush()).is_err() {
                say!("pinfold hook: cannot write the decision");
                return FAIL;
            }
            crate::exit::OK
        }
        Ok(None) => crate::exit::OK,
        Err(e) => failed(fail, &e.one_line()),
    }
}

/// Append the `hook` record: what `core` decided (`data`), for which agent, tool and session,
/// and the answer given (hook tokens shortened), or the failure that blocked the call.
fn record(dirs: &pinfold_plan::Dirs, agent: &str, payload: &Value, audit: &pinfold_policy::config::Audit, mut data: Value, answer: Option<&str>, failure: Option<&str>) -> Result<(), Error> {
    let field = |keys: &[&str]| keys.iter().find_map(|k| payload.get(*k).and_then(Value::as_str)).map(str::to_string);
    let session = field(&["session_id", "sessionId", "conversation_id"]);
    data["agent"] = agent.into();
    if let Some(t) = field(&["tool_name", "toolName"]) {
        data["tool"] = t.into();
    }
    if let Some(e) = field(&["hook_event_name", "hookEventName"]) {
        data["event"] = e.into();
    }
    if let Some(a) = answer {
        let short = pinfold_plan::record::shorten_tokens(a);
        data["answer"] = serde_json::from_str(&short).unwrap_or(Value::String(short));
    }
    if let Some(f) = failure {
        data["decision"] = "deny".into();
        data["error"] = f.into();
    }
    let recorder = pinfold_plan::record::Recorder::open(audit, dirs)?.session(session);
    recorder.record("hook", data).map(drop)
}

/// Report `line` the way `fail` says; the exit code to use.
fn failed(fail: Fail, line: &str) -> i32 {
    say!("pinfold hook: {line}");
    match fail {
        Fail::Exit2 => FAIL,
        Fail::Deny(deny) => {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            match writeln!(o, "{}", deny(&format!("pinfold could not decide, so it refuses: {line}"))).and_then(|()| o.flush()) {
                Ok(()) => crate::exit::OK,
                Err(_) => FAIL,
            }
        }
    }
}
