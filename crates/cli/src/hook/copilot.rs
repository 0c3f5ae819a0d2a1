//! GitHub Copilot CLI's preToolUse protocol (see docs/hooks.md for the sources).
//!
//! Input (stdin, the camelCase format of an event configured as `preToolUse`): `{"sessionId",
//! "timestamp", "cwd", "toolName", "toolArgs"}`. `toolArgs` is the tool's arguments, a JSON
//! string (an object is accepted too). Tools pinfold judges: `bash` (`command`), `create` and
//! `edit` (`path`), `view` (`path`), `grep` and `glob` (`path`, optional).
//!
//! Output (stdout): `{"permissionDecision": "allow"|"deny"|"ask", "permissionDecisionReason":
//! "…", "modifiedArgs": {…}}`; `modifiedArgs` replaces the arguments, so it is the original with
//! only `command` changed. No output: no opinion.
//!
//! Copilot CLI logs and skips a hook that fails (non-zero exit, timeout): pinfold's failures
//! answer a deny on stdout and exit 0.

use pinfold_policy::config::Action;
use serde_json::{json, Map, Value};

use super::core;
use pinfold_plan::{Dirs, Error};

pub fn failure(line: &str) -> String {
    json!({"permissionDecision": "deny", "permissionDecisionReason": line}).to_string()
}

fn output(decision: Action, reason: &str, modified: Option<Value>) -> String {
    let mut o = json!({"permissionDecision": decision.as_str(), "permissionDecisionReason": format!("pinfold: {reason}")});
    if let Some(m) = modified {
        o["modifiedArgs"] = m;
    }
    o.to_string()
}

fn deny(reason: &str) -> String {
    output(Action::Deny, reason, None)
}

pub fn answer(input: &[u8], dirs: &Dirs) -> Result<Option<String>, Error> {
    let payload: Value = serde_json::from_slice(input).map_err(|e| Error::new("the hook input is not valid JSON").cause(e))?;
    let obj = payload.as_object().ok_or_else(|| Error::new("the hook input is not a JSON object"))?;
    if obj.contains_key("tool_name") || obj.contains_key("hook_event_name") {
        return Err(Error::new(
            "this is the snake_case (PreToolUse) payload; register pinfold for the camelCase `preToolUse` event",
        ));
    }
    let tool = obj.get("toolName").and_then(Value::as_str).ok_or_else(|| Error::new("the hook input has no `toolName`"))?;
    let args: Map<String, Value> = match obj.get("toolArgs") {
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(Value::Object(m)) => m,
            _ => return Err(Error::new("the hook input's `toolArgs` is not a JSON object")),
        },
        Some(Value::Object(m)) => m.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(Error::new("the hook input's `toolArgs` is not a JSON object")),
    };
    let cwd = core::cwd(obj.get("cwd"), "cwd")?;
    let path = |required: bool| -> Result<Option<&str>, Error> {
        match args.get("path") {
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            None | Some(Value::Null) if !required => Ok(None),
            _ => Err(Error::new(format!("the {tool} call has no `path` string"))),
        }
    };
    let denied = match tool {
        "bash" => {
            let command = args.get("command").and_then(Value::as_str).ok_or_else(|| Error::new("the bash call has no `command` string"))?;
            let s = core::shell(dirs, command, &cwd)?;
            let modified = s.command.map(|c| {
                let mut m = args.clone();
                m.insert("command".into(), Value::String(c));
                Value::Object(m)
            });
            return Ok(Some(output(s.decision, &s.reason, modified)));
        }
        "create" | "edit" => core::write_denied(dirs, &cwd, path(true)?.unwrap_or_default())?,
        "view" => core::read_denied(dirs, &cwd, path(true)?.unwrap_or_default(), false)?,
        "grep" | "glob" => {
            let mut found = core::read_denied(dirs, &cwd, path(false)?.unwrap_or("."), true)?;
            if found.is_none()
                && tool == "glob"
                && let Some(root) = args.get("pattern").and_then(Value::as_str).and_then(core::glob_root)
            {
                found = core::read_denied(dirs, &cwd, &root, false)?;
            }
            found
        }
        _ => None,
    };
    Ok(denied.map(|why| deny(&why)))
}
