//! Cursor's hook protocol (see docs/hooks.md for the sources, and what they do not confirm).
//!
//! One command serves every event; `hook_event_name` says which. Common input fields:
//! `conversation_id`, `generation_id`, `model`, `cursor_version`, `workspace_roots`,
//! `user_email`, `transcript_path`.
//!
//! * `preToolUse`: `tool_name` (`Shell`, `Read`, `Write`, `Edit`, `Grep`, `Delete`, MCP tools…),
//!   `tool_input` (`{"command", "cwd"}` for `Shell`; the file tools' path in `file_path`, `path`
//!   or `target_file`), `tool_use_id`, `cwd`. Answer `{"permission": "allow"|"deny"|"ask",
//!   "user_message", "agent_message", "updated_input": {…}}`: a shell command is rewritten in
//!   `updated_input`, the whole input with only `command` changed.
//! * `beforeShellExecution`: `command`, `cwd`. Answer `permission` (allow / deny / ask). It
//!   cannot rewrite, so a command that needs a sandbox is denied here, with a reason naming the
//!   `preToolUse` hook that can run it sandboxed.
//! * `beforeReadFile`: `file_path`, `content`, `attachments`. Answer `permission` allow / deny.
//! * anything else: `{}` (no opinion).
//!
//! A failed hook lets Cursor's call through unless its entry says `"failClosed": true`, so
//! pinfold's failures answer `{"permission": "deny"}` on stdout and exit 0.

use std::path::PathBuf;

use pinfold_policy::config::Action;
use serde_json::{json, Map, Value};

use super::core;
use pinfold_plan::{Dirs, Error};

const NO_OPINION: &str = "{}";

pub fn failure(line: &str) -> String {
    json!({"permission": "deny", "user_message": line, "agent_message": line}).to_string()
}

fn answer_of(permission: Action, reason: &str, updated: Option<Value>) -> String {
    let msg = format!("pinfold: {reason}");
    let mut o = json!({"permission": permission.as_str(), "user_message": msg, "agent_message": msg});
    if let Some(u) = updated {
        o["updated_input"] = u;
    }
    o.to_string()
}

fn deny(reason: &str) -> String {
    answer_of(Action::Deny, reason, None)
}

/// The path arguments of a file tool: every one of `file_path`, `path` and `target_file` the
/// call holds (which one a Cursor version acts on is not ours to guess, so each is checked).
fn path_args<'a>(ti: &'a Map<String, Value>, tool: &str, required: bool) -> Result<Vec<&'a str>, Error> {
    let mut out = Vec::new();
    for key in ["file_path", "path", "target_file"] {
        match ti.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => out.push(s.as_str()),
            Some(_) => return Err(Error::new(format!("the {tool} call's `{key}` is not a string"))),
        }
    }
    if required && out.is_empty() {
        return Err(Error::new(format!("the {tool} call has no `file_path`, `path` or `target_file` string")));
    }
    Ok(out)
}

/// The working directory: `cwd` if given, else the first workspace root, else pinfold's own.
fn workdir(obj: &Map<String, Value>, inner: Option<&Map<String, Value>>) -> Result<PathBuf, Error> {
    if let Some(c) = inner.and_then(|i| i.get("cwd")).filter(|v| !v.is_null()) {
        return core::cwd(Some(c), "tool_input.cwd");
    }
    session_dir(obj)
}

/// The session's own directory: `cwd`, else the first workspace root, else pinfold's own.
fn session_dir(obj: &Map<String, Value>) -> Result<PathBuf, Error> {
    if let Some(c) = obj.get("cwd").filter(|v| !v.is_null()) {
        return core::cwd(Some(c), "cwd");
    }
    let root = obj.get("workspace_roots").and_then(Value::as_array).and_then(|r| r.first());
    core::cwd(root, "workspace_roots")
}

pub fn answer(input: &[u8], dirs: &Dirs) -> Result<Option<String>, Error> {
    let payload: Value = serde_json::from_slice(input).map_err(|e| Error::new("the hook input is not valid JSON").cause(e))?;
    let obj = payload.as_object().ok_or_else(|| Error::new("the hook input is not a JSON object"))?;
    let event = obj.get("hook_event_name").and_then(Value::as_str).ok_or_else(|| Error::new("the hook input has no `hook_event_name`"))?;
    let text = |v: Option<&Value>, what: &str| -> Result<String, Error> {
        v.and_then(Value::as_str).map(str::to_string).ok_or_else(|| Error::new(format!("the {event} input has no `{what}` string")))
    };
    let out = match event {
        "preToolUse" => {
            let tool = text(obj.get("tool_name"), "tool_name")?;
            let ti = obj.get("tool_input").and_then(Value::as_object).ok_or_else(|| Error::new("the preToolUse input has no `tool_input` object"))?;
            let cwd = workdir(obj, Some(ti))?;
            if ti.get("cwd").is_some_and(|v| !v.is_null()) {
                // A directory the model chose: it must lie in the session's workspace.
                let mut roots: Vec<PathBuf> = Vec::new();
                if obj.get("cwd").is_some_and(|v| !v.is_null()) {
                    roots.push(session_dir(obj)?);
                }
                for r in obj.get("workspace_roots").and_then(Value::as_array).into_iter().flatten() {
                    roots.push(core::cwd(Some(r), "workspace_roots")?);
                }
                if let Some(why) = core::outside_workspace(&cwd, &roots) {
                    return Ok(Some(deny(&why)));
                }
            }
            match tool.as_str() {
                "Shell" => {
                    let command = text(ti.get("command"), "tool_input.command")?;
                    let s = core::shell(dirs, &command, &cwd)?;
                    let updated = s.command.map(|c| {
                        let mut u = ti.clone();
                        u.insert("command".into(), Value::String(c));
                        Value::Object(u)
                    });
                    answer_of(s.decision, &s.reason, updated)
                }
                "Write" | "Edit" | "StrReplace" | "MultiEdit" | "Delete" | "TabWrite" | "EditNotebook" => {
                    let mut found = None;
                    for path in path_args(ti, &tool, true)? {
                        found = found.or(core::write_denied(dirs, &cwd, path)?);
                    }
                    found.map_or_else(|| NO_OPINION.into(), |why| deny(&why))
                }
                "Read" | "Grep" | "Glob" | "LS" => {
                    let mut paths = path_args(ti, &tool, tool == "Read")?;
                    if paths.is_empty() {
                        paths.push(".");
                    }
                    let mut found = None;
                    for path in paths {
                        found = found.or(core::read_denied(dirs, &cwd, path, tool != "Read")?);
                    }
                    if found.is_none()
                        && let Some(root) = ["glob_pattern", "pattern"].iter().find_map(|k| ti.get(*k).and_then(Value::as_str)).and_then(core::glob_root)
                        && tool == "Glob"
                    {
                        found = core::read_denied(dirs, &cwd, &root, false)?;
                    }
                    found.map_or_else(|| NO_OPINION.into(), |why| deny(&why))
                }
                _ => NO_OPINION.into(),
            }
        }
        "beforeShellExecution" => {
            let command = text(obj.get("command"), "command")?;
            let cwd = workdir(obj, None)?;
            let s = core::shell(dirs, &command, &cwd)?;
            match s.command {
                Some(c) if c != command => deny(&format!(
                    "{}; it must run in a pinfold sandbox, and beforeShellExecution cannot rewrite a command: \
                     install pinfold on Cursor's preToolUse hook (`pinfold init --agent cursor`), which runs it sandboxed",
                    s.reason
                )),
                _ => answer_of(s.decision, &s.reason, None),
            }
        }
        "beforeReadFile" => {
            let path = text(obj.get("file_path"), "file_path")?;
            let cwd = workdir(obj, None)?;
            match core::read_denied(dirs, &cwd, &path, false)? {
                Some(why) => deny(&why),
                None => json!({"permission": "allow"}).to_string(),
            }
        }
        _ => NO_OPINION.into(),
    };
    Ok(Some(out))
}

