//! Claude Code's PreToolUse protocol.
//!
//! Input (stdin): `{"session_id", "transcript_path", "cwd", "permission_mode",
//! "hook_event_name": "PreToolUse", "tool_name", "tool_input": {…}, "tool_use_id"}`; only
//! `tool_name` and `tool_input` are required, unknown fields are ignored.
//!
//! Output (stdout): `{"hookSpecificOutput": {"hookEventName": "PreToolUse",
//! "permissionDecision": "allow"|"ask"|"deny", "permissionDecisionReason": "…",
//! "updatedInput": {…}}}`. `updatedInput` replaces the whole tool input, so it is the
//! original with only `command` changed; it is left out on deny. No output: no opinion.

use std::path::Path;

use pinfold_policy::config::Action;
use serde_json::{json, Map, Value};

use super::core;
use pinfold_plan::{Dirs, Error};

/// A PreToolUse call as Claude Code and Codex send it.
pub(super) struct PreToolUse {
    pub tool: String,
    pub input: Map<String, Value>,
    pub cwd: std::path::PathBuf,
}

/// Read a PreToolUse payload; `None` when it is for another event (registered there by
/// mistake: not ours to decide).
pub(super) fn pre_tool_use(input: &[u8]) -> Result<Option<PreToolUse>, Error> {
    let payload: Value = serde_json::from_slice(input).map_err(|e| Error::new("the hook input is not valid JSON").cause(e))?;
    let Some(obj) = payload.as_object() else {
        return Err(Error::new("the hook input is not a JSON object"));
    };
    if let Some(ev) = obj.get("hook_event_name")
        && ev.as_str() != Some("PreToolUse")
    {
        return Ok(None);
    }
    let tool = obj.get("tool_name").and_then(Value::as_str).ok_or_else(|| Error::new("the hook input has no `tool_name`"))?;
    let tool_input = obj.get("tool_input").and_then(Value::as_object).ok_or_else(|| Error::new("the hook input has no `tool_input` object"))?;
    let cwd = core::cwd(obj.get("cwd"), "cwd")?;
    Ok(Some(PreToolUse { tool: tool.to_string(), input: tool_input.clone(), cwd }))
}

/// The hook's answer for `input`; `None` for no opinion.
pub fn answer(input: &[u8], dirs: &Dirs) -> Result<Option<String>, Error> {
    let Some(PreToolUse { tool, input: tool_input, cwd }) = pre_tool_use(input)? else { return Ok(None) };
    let (tool, tool_input) = (tool.as_str(), &tool_input);
    match tool {
        "Bash" => bash(tool_input, &cwd, dirs).map(Some),
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
            let key = if tool == "NotebookEdit" { "notebook_path" } else { "file_path" };
            let path = string_field(tool_input, key, tool)?;
            Ok(core::write_denied(dirs, &cwd, path)?.map(|why| deny(&why)))
        }
        "Read" | "Grep" | "Glob" => {
            let key = if tool == "Read" { "file_path" } else { "path" };
            let path = match tool_input.get(key) {
                None | Some(Value::Null) if tool != "Read" => None,
                _ => Some(string_field(tool_input, key, tool)?),
            };
            let mut found = core::read_denied(dirs, &cwd, path.unwrap_or("."), tool == "Grep")?;
            if found.is_none() && tool == "Glob" {
                // An absolute or `~` pattern names its own directory.
                if let Some(lit) = tool_input.get("pattern").and_then(Value::as_str).and_then(core::glob_root) {
                    found = core::read_denied(dirs, &cwd, &lit, false)?;
                }
            }
            Ok(found.map(|why| deny(&why)))
        }
        _ => Ok(None),
    }
}

pub(super) fn string_field<'a>(input: &'a Map<String, Value>, key: &str, tool: &str) -> Result<&'a str, Error> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| Error::new(format!("the {tool} call has no `{key}` string")))
}

/// The PreToolUse answer (Codex reads the same shape).
pub(super) fn output(decision: Action, reason: &str, updated: Option<Value>) -> String {
    let mut o = json!({
        "hookEventName": "PreToolUse",
        "permissionDecision": decision.as_str(),
        "permissionDecisionReason": format!("pinfold: {reason}"),
    });
    if let Some(u) = updated {
        o["updatedInput"] = u;
    }
    json!({ "hookSpecificOutput": o }).to_string()
}

pub(super) fn deny(reason: &str) -> String {
    output(Action::Deny, reason, None)
}

fn bash(input: &Map<String, Value>, cwd: &Path, dirs: &Dirs) -> Result<String, Error> {
    let command = string_field(input, "command", "Bash")?;
    let s = core::shell(dirs, command, cwd)?;
    let updated = s.command.map(|c| {
        let mut u = input.clone();
        u.insert("command".into(), Value::String(c));
        Value::Object(u)
    });
    Ok(output(s.decision, &s.reason, updated))
}
