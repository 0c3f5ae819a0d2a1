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
use pinfold_plan::{Dirs, Error};

const NO_OPINION: &str = "{}";

pub fn answer(input: &[u8], dirs: &Dirs) -> Result<Option<String>, Error> {
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
        "run_shell_command" => return shell(ti, &cwd, dirs).map(Some),
        "write_file" | "replace" => {
            let mut found = core::write_denied(dirs, &cwd, string_field(ti, "file_path", tool)?)?;
            // Every path key the call holds is checked: which one a version acts on is not
            // ours to guess.
            if let Some(p) = ti.get("absolute_path").and_then(Value::as_str) {
                found = found.or(core::write_denied(dirs, &cwd, p)?);
            }
            found
        }
        "read_file" => {
            let paths: Vec<&str> = ["file_path", "absolute_path"].iter().filter_map(|k| ti.get(*k).and_then(Value::as_str)).collect();
            if paths.is_empty() {
                return Err(Error::new("the read_file call has no `file_path` string"));
            }
            let mut found = None;
            for p in paths {
                found = found.or(core::read_denied(dirs, &cwd, p, false)?);
            }
            found
        }
        "list_directory" | "glob" | "search_file_content" | "grep_search" => {
            let mut found = None;
            for dir in dir_args(ti, tool)? {
                found = found.or(core::read_denied(dirs, &cwd, dir, tool != "list_directory")?);
            }
            if found.is_none()
                && let Some(root) = ti.get("pattern").and_then(Value::as_str).and_then(core::glob_root)
                && tool == "glob"
            {
                found = core::read_denied(dirs, &cwd, &root, false)?;
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
                        found = core::read_denied(dirs, &cwd, if lit.is_empty() { "." } else { &lit }, true)?;
                    }
                }
            }
            found
        }
        _ => None,
    };
    Ok(Some(denied.map_or_else(|| NO_OPINION.into(), |why| deny(&why))))
}

/// Every directory key the call holds (`.` when none): each is checked.
fn dir_args<'a>(ti: &'a Map<String, Value>, tool: &str) -> Result<Vec<&'a str>, Error> {
    let mut out = Vec::new();
    for key in ["dir_path", "directory", "path"] {
        match ti.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => out.push(s.as_str()),
            Some(_) => return Err(Error::new(format!("the {tool} call's `{key}` is not a string"))),
        }
    }
    if out.is_empty() {
        out.push(".");
    }
    Ok(out)
}

fn deny(reason: &str) -> String {
    json!({"decision": "deny", "reason": format!("pinfold: {reason}")}).to_string()
}

fn shell(ti: &Map<String, Value>, cwd: &Path, dirs: &Dirs) -> Result<String, Error> {
    let command = string_field(ti, "command", "run_shell_command")?;
    // The command runs in `dir_path` (relative to the project root) when given.
    // The directory to run in: each key the call holds must name the same one, inside the
    // session's workspace (which key a Gemini CLI version reads is not ours to guess).
    let mut run_dirs: Vec<std::path::PathBuf> = Vec::new();
    for key in ["dir_path", "directory", "path"] {
        match ti.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(d)) => {
                let dir = core::cwd(Some(&Value::String(cwd.join(d).to_string_lossy().into_owned())), key)?;
                if let Some(why) = core::outside_workspace(&dir, &[cwd.to_path_buf()]) {
                    return Ok(deny(&why));
                }
                run_dirs.push(dir);
            }
            Some(_) => return Err(Error::new(format!("the run_shell_command call's `{key}` is not a string"))),
        }
    }
    if run_dirs.windows(2).any(|p| p[0] != p[1]) {
        let names: Vec<String> = run_dirs.iter().map(|d| d.display().to_string()).collect();
        return Ok(deny(&format!("the call names several directories to run in ({}); pinfold cannot tell which one Gemini CLI uses", names.join(", "))));
    }
    let cwd = run_dirs.pop().unwrap_or_else(|| cwd.to_path_buf());
    let s = core::shell(dirs, command, &cwd)?;
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
