//! `pinfold hook <agent>`: answer an agent's pre-tool hook.
//!
//! The agent runs `pinfold hook claude-code` before each tool call with the call as JSON on
//! standard input; pinfold answers allow / ask / deny and rewrites shell commands so that what
//! needs a sandbox runs in one (`rewrite`), carrying a token (`token`) that lets `pinfold exec`
//! run an asked sub-command once a person approved it. See docs/hooks.md.
//!
//! Fail closed: anything unexpected (malformed or oversized input, a missing field, an
//! unreadable policy, an internal error, a panic) exits 2 with one line on stderr, which makes
//! the agent block the call. Never 1 (Claude Code lets the call through on 1).

mod claude;
pub mod rewrite;
pub mod token;

use std::io::Read;

use clap::{Args, Subcommand};

use crate::anyhow_lite::Error;

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
}

pub fn run(args: HookArgs) -> Result<i32, Error> {
    // A panic is an internal error: fail closed with exit 2, not Rust's 101.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        eprintln!("pinfold hook: internal error: {msg}");
        std::process::exit(FAIL);
    }));
    let out = match args.agent {
        Agent::ClaudeCode => read_input().and_then(|input| claude::answer(&input)),
    };
    match out {
        Ok(Some(json)) => {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            if writeln!(o, "{json}").and_then(|()| o.flush()).is_err() {
                eprintln!("pinfold hook: cannot write the decision");
                return Ok(FAIL);
            }
            Ok(crate::exit::OK)
        }
        Ok(None) => Ok(crate::exit::OK),
        Err(e) => {
            let mut line = e.headline;
            for c in e.causes {
                line.push_str(": ");
                line.push_str(&c);
            }
            eprintln!("pinfold hook: {}", line.replace('\n', " "));
            Ok(FAIL)
        }
    }
}

/// Standard input, at most [`MAX_INPUT`] bytes.
fn read_input() -> Result<Vec<u8>, Error> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::new("cannot read the hook input").cause(e))?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(Error::new(format!("hook input over {MAX_INPUT} bytes; refusing it")));
    }
    Ok(buf)
}
