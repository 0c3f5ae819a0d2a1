//! OpenAI Codex CLI's PreToolUse protocol (see docs/hooks.md for the sources).
//!
//! Input (stdin): `{"session_id", "turn_id", "transcript_path", "cwd", "hook_event_name":
//! "PreToolUse", "model", "permission_mode", "tool_name", "tool_input", "tool_use_id"}`.
//! `tool_name` is `Bash` for the shell tools (`tool_input: {"command": …}`) and `apply_patch`
//! for file edits, whose `tool_input.command` is the raw patch text; MCP tools are
//! `mcp__server__tool`.
//!
//! Output (stdout): the Claude Code shape, `{"hookSpecificOutput": {"hookEventName":
//! "PreToolUse", "permissionDecision": "allow"|"deny", "permissionDecisionReason": "…",
//! "updatedInput": {…}}}`. Codex rejects `ask` (and `allow` without `updatedInput`) as
//! unsupported and then runs the call, so pinfold never answers them: an ask becomes a deny
//! saying how to allow it, and an allow always carries `updatedInput`. Exit 2 with a reason on
//! stderr blocks the call.

use std::path::Path;

use pinfold_policy::config::Action;
use serde_json::{Map, Value};

use super::claude::string_field;
use super::core;
use pinfold_plan::{Dirs, Error};

pub fn answer(input: &[u8], dirs: &Dirs) -> Result<Option<String>, Error> {
    // Codex sends Claude Code's PreToolUse shape.
    let Some(super::claude::PreToolUse { tool, input: tool_input, cwd }) = super::claude::pre_tool_use(input)? else {
        return Ok(None);
    };
    let (tool, tool_input) = (tool.as_str(), &tool_input);
    match tool {
        "Bash" => bash(tool_input, &cwd, dirs).map(Some),
        "apply_patch" => {
            let patch = string_field(tool_input, "command", tool)?;
            let files = patch_files(patch);
            if files.is_empty() {
                return Ok(Some(deny("pinfold found no `*** Add/Update/Delete File:` line in this patch, so it cannot tell which files it writes")));
            }
            for f in files {
                if let Some(why) = core::write_denied(dirs, &cwd, f)? {
                    return Ok(Some(deny(&why)));
                }
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// The files an apply_patch body writes: its `*** Add File:`, `*** Update File:`, `*** Delete
/// File:` and `*** Move to:` lines — with any whitespace around them, as Codex's parser trims
/// each line before it reads a header (a header indented by a space, a tab, a vertical tab or
/// U+3000 was applied by Codex and unseen here).
pub fn patch_files(patch: &str) -> Vec<&str> {
    patch
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            ["*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "]
                .iter()
                .find_map(|p| l.strip_prefix(p))
                .map(str::trim)
        })
        .filter(|p| !p.is_empty())
        .collect()
}

// Codex answers in Claude Code's PreToolUse shape.
use super::claude::{deny, output};

fn bash(input: &Map<String, Value>, cwd: &Path, dirs: &Dirs) -> Result<String, Error> {
    let command = string_field(input, "command", "Bash")?;
    let s = core::shell(dirs, command, cwd)?;
    match (s.decision, s.command) {
        (Action::Allow, Some(c)) => {
            let mut u = input.clone();
            u.insert("command".into(), Value::String(c));
            Ok(output(Action::Allow, &s.reason, Some(Value::Object(u))))
        }
        (Action::Ask, _) => Ok(deny(&core::ask_as_deny("Codex", &s.reason))),
        _ => Ok(deny(&s.reason)),
    }
}
