//! Gemini CLI's BeforeTool protocol (see docs/hooks.md for the sources).
//!
//! Input (stdin): `{"session_id", "transcript_path", "cwd", "hook_event_name": "BeforeTool",
//! "timestamp", "tool_name", "tool_input", "mcp_context"}`. Tools pinfold judges:
//! `run_shell_command` (`command`, and `dir_path` — `directory` in older releases — relative to
//! the project root), `write_file` and `replace` (`file_path`), and the read tools `read_file`
//! (`file_path`, older `absolute_path`), `read_many_files` (`include`/`paths`), `list_directory`,
//! `glob`, `search_file_content`/`grep_search` (`dir_path` or `path`).
//!
//! Output (stdout): `{"decision": "allow"|"deny", "reason": "…", "hookSpecificOutput":
//! {"hookEventName": "BeforeTool", "tool_input": {"command": "…"}}}`; `tool_input` is merged
//! over the model's arguments. Gemini CLI hooks cannot ask a person: an ask becomes a deny
//! saying how to allow it. No opinion: `{}`. Exit 2 with a reason on stderr blocks the call.

use std::path::Path;

use pinfold_policy::config::Action;
use serde_json::{json, Map, Value};

use super::claude::string_field;
use super::core;
use crate::anyhow_lite::Error;

const NO_OPINION: &str = "{}";

pub fn answer(input: &[u8]) -> Result<Option<String>, Error> {
    let payload: Value = serde_json::from_slice(input).map_err(|e| Error::new("the hook input is not valid JSON").cause(e))?;
    let obj = payload.as_object().ok_or_else(|| Error::new("the hook input is not a JSON object"))?;
    if let Some(ev) = obj.get("hook_event_name")
        && ev.as_str() != Some("BeforeTool")
    {
        return Ok(Some(NO_OPINION.into()));
    }
    let tool = obj.get("tool_name").and_then(Value::as_str).ok_or_else(|| Error::new("the hook input has no `tool_name`"))?;
    let ti = obj.get("tool_input").and_then(Value::as_object).ok_or_else(|| Error::new("the hook input has no `tool_input` object"))?;
    let cwd = core::cwd(obj.get("cwd"), "cwd")?;
    let denied = match tool {
        "run_shell_command" => return shell(ti, &cwd).map(Some),
        "write_file" | "replace" => core::write_denied(&cwd, string_field(ti, "file_path", tool)?)?,
        "read_file" => {
            let path = ti.get("file_path").or_else(|| ti.get("absolute_path")).and_then(Value::as_str);
            let path = path.ok_or_else(|| Error::new("the read_file call has no `file_path` string"))?;
            core::read_denied(&cwd, path, false)?
        }
        "list_directory" | "glob" | "search_file_content" | "grep_search" => {
            let dir = dir_arg(ti, tool)?.unwrap_or(".");
            let mut found = core::read_denied(&cwd, dir, tool != "list_directory")?;
            if found.is_none()
                && let Some(root) = ti.get("pattern").and_then(Value::as_str).and_then(core::glob_root)
                && tool == "glob"
            {
                found = core::read_denied(&cwd, &root, false)?;
            }
            found
        }
        "read_many_files" => {
            let mut found = None;
            for key in ["include", "paths"] {
                for p in ti.get(key).and_then(Value::as_array).into_iter().flatten() {
                    let p = p.as_str().ok_or_else(|| Error::new(format!("the read_many_files call's `{key}` holds a non-string")))?;
                    // The literal directory a glob starts in; a relative one is under cwd.
                    let lit: String = p.chars().take_while(|c| !matches!(c, '*' | '?' | '[' | '{')).collect();
                    if found.is_none() {
                        found = core::read_denied(&cwd, if lit.is_empty() { "." } else { &lit }, true)?;
                    }
                }
            }
            found
        }
        _ => None,
    };
    Ok(Some(denied.map_or_else(|| NO_OPINION.into(), |why| deny(&why))))
}

fn dir_arg<'a>(ti: &'a Map<String, Value>, tool: &str) -> Result<Option<&'a str>, Error> {
    for key in ["dir_path", "directory", "path"] {
        match ti.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s)),
            Some(_) => return Err(Error::new(format!("the {tool} call's `{key}` is not a string"))),
        }
    }
    Ok(None)
}

fn deny(reason: &str) -> String {
    json!({"decision": "deny", "reason": format!("pinfold: {reason}")}).to_string()
}

fn shell(ti: &Map<String, Value>, cwd: &Path) -> Result<String, Error> {
    let command = string_field(ti, "command", "run_shell_command")?;
    // The command runs in `dir_path` (relative to the project root) when given.
    let cwd = match dir_arg(ti, "run_shell_command")? {
        Some(d) => {
            let dir = core::cwd(Some(&Value::String(cwd.join(d).to_string_lossy().into_owned())), "dir_path")?;
            if let Some(why) = core::outside_workspace(&dir, &[cwd.to_path_buf()]) {
                return Ok(deny(&why));
            }
            dir
        }
        None => cwd.to_path_buf(),
    };
    let s = core::shell(command, &cwd)?;
    Ok(match (s.decision, s.command) {
        (Action::Allow, Some(c)) => json!({
            "decision": "allow",
            "reason": format!("pinfold: {}", s.reason),
            "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"command": c}},
        })
        .to_string(),
        (Action::Ask, _) => deny(&core::ask_as_deny("Gemini CLI", &s.reason)),
        _ => deny(&s.reason),
    })
}
