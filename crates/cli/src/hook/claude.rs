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

use std::path::{Component, Path, PathBuf};

use pinfold_policy::config::{Action, Config, SandboxPreset};
use pinfold_policy::matcher::{in_or_under, normalize};
use serde_json::{json, Map, Value};

use super::{rewrite, token};
use crate::anyhow_lite::Error;

/// The hook's answer for `input`; `None` for no opinion.
pub fn answer(input: &[u8]) -> Result<Option<String>, Error> {
    let payload: Value = serde_json::from_slice(input).map_err(|e| Error::new("the hook input is not valid JSON").cause(e))?;
    let Some(obj) = payload.as_object() else {
        return Err(Error::new("the hook input is not a JSON object"));
    };
    if let Some(ev) = obj.get("hook_event_name")
        && ev.as_str() != Some("PreToolUse")
    {
        // Registered for another event by mistake: not ours to decide.
        return Ok(None);
    }
    let tool = obj.get("tool_name").and_then(Value::as_str).ok_or_else(|| Error::new("the hook input has no `tool_name`"))?;
    let tool_input = obj.get("tool_input").and_then(Value::as_object).ok_or_else(|| Error::new("the hook input has no `tool_input` object"))?;
    let cwd = match obj.get("cwd") {
        None | Some(Value::Null) => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
        Some(Value::String(s)) => PathBuf::from(s),
        Some(_) => return Err(Error::new("the hook input's `cwd` is not a string")),
    };
    let cwd = crate::absolute(&cwd)?;
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| Error::new(format!("cannot resolve {}", cwd.display())).cause(e))?;
    match tool {
        "Bash" => bash(tool_input, &cwd).map(Some),
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" => {
            let key = if tool == "NotebookEdit" { "notebook_path" } else { "file_path" };
            let path = string_field(tool_input, key, tool)?;
            let policy = crate::load_policy(None, Some(&cwd), true)?;
            Ok(write_check(policy.config(), &cwd, path).map(|why| deny(&why)))
        }
        "Read" | "Grep" | "Glob" => {
            let key = if tool == "Read" { "file_path" } else { "path" };
            let path = match tool_input.get(key) {
                None | Some(Value::Null) if tool != "Read" => None,
                _ => Some(string_field(tool_input, key, tool)?),
            };
            let policy = crate::load_policy(None, Some(&cwd), true)?;
            let mut found = read_check(policy.config(), &cwd, path.unwrap_or("."), tool == "Grep");
            if found.is_none() && tool == "Glob" {
                // An absolute or `~` pattern names its own directory.
                if let Some(p) = tool_input.get("pattern").and_then(Value::as_str).filter(|p| p.starts_with(['/', '~'])) {
                    let lit: String = p.chars().take_while(|c| !matches!(c, '*' | '?' | '[' | '{')).collect();
                    found = read_check(policy.config(), &cwd, &lit, false);
                }
            }
            Ok(found.map(|why| deny(&why)))
        }
        _ => Ok(None),
    }
}

fn string_field<'a>(input: &'a Map<String, Value>, key: &str, tool: &str) -> Result<&'a str, Error> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| Error::new(format!("the {tool} call has no `{key}` string")))
}

fn output(decision: Action, reason: &str, updated: Option<Value>) -> String {
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

fn deny(reason: &str) -> String {
    output(Action::Deny, reason, None)
}

fn bash(input: &Map<String, Value>, cwd: &Path) -> Result<String, Error> {
    let command = string_field(input, "command", "Bash")?;
    let policy = crate::load_policy(None, Some(cwd), true)?;
    let j = policy.judge(command, cwd);
    if j.decision == Action::Deny {
        return Ok(deny(&j.reason));
    }
    let exe = std::env::current_exe().map_err(|e| Error::new("cannot find the pinfold binary").cause(e))?;
    let key = token::load_or_create_key().map_err(|e| Error::new(format!("cannot use the hook key: {e}")))?;
    let now = token::now();
    let plan = rewrite::plan(policy.config(), &j, command, &exe, &|text, preset| token::mint(&key, text, preset, cwd, now));
    let updated = plan.command.map(|c| {
        let mut u = input.clone();
        u.insert("command".into(), Value::String(c));
        Value::Object(u)
    });
    Ok(output(plan.decision, &plan.reason, if plan.decision == Action::Deny { None } else { updated }))
}

/// The default sandbox preset, if the policy has one.
fn default_preset(config: &Config) -> Option<&SandboxPreset> {
    config.defaults.sandbox.as_deref().and_then(|n| config.sandboxes.get(n))
}

/// `p` made absolute against `cwd` (with `~` expanded) and normalised, and the same with every
/// existing part resolved through symlinks.
fn resolve(cwd: &Path, p: &str) -> (PathBuf, PathBuf) {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let expanded = match (p.strip_prefix('~'), &home) {
        (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(p),
    };
    let lexical = normalize(&cwd.join(expanded));
    let mut existing = lexical.as_path();
    let mut rest: Vec<Component<'_>> = Vec::new();
    let canonical = loop {
        if let Ok(c) = std::fs::canonicalize(existing) {
            break rest.iter().rev().fold(c, |acc, x| acc.join(x));
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => break lexical.clone(),
        }
    };
    (lexical, canonical)
}

/// Why the default sandbox could not write `path`; `None` when it could.
fn write_check(config: &Config, cwd: &Path, path: &str) -> Option<String> {
    let preset = default_preset(config)?;
    let (lex, canon) = resolve(cwd, path);
    let both = [&lex, &canon];
    // pinfold's own files: its policy, configuration, cache and hook key.
    let mut own: Vec<PathBuf> = config.files.clone();
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(x) = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|h| h.join(".config"))) {
        own.push(x.join("pinfold"));
    }
    own.extend(crate::cache_dir());
    own.extend(token::key_path().and_then(|k| k.parent().map(Path::to_path_buf)));
    if let Some(o) = own.iter().find(|o| both.iter().any(|p| p.starts_with(o))) {
        return Some(format!("`{}` is pinfold's own file ({}); agents may not change it", lex.display(), o.display()));
    }
    if let Some(d) = preset.write_deny.iter().find(|d| both.iter().any(|p| in_or_under(p, d))) {
        return Some(format!("`{}` is write-protected in the `{}` sandbox (`{d}`)", lex.display(), preset.name));
    }
    if !preset.write_allow.iter().any(|a| in_or_under(&canon, a)) {
        return Some(format!(
            "`{}` is outside what the `{}` sandbox may write ({})",
            canon.display(),
            preset.name,
            if preset.write_allow.is_empty() { "nothing".to_string() } else { preset.write_allow.join(", ") }
        ));
    }
    None
}

/// Why the default sandbox could not read `path`; `None` when it could. `contents_below`:
/// the tool reads everything below `path` (Grep), so a hidden path beneath it counts too.
fn read_check(config: &Config, cwd: &Path, path: &str, contents_below: bool) -> Option<String> {
    let preset = default_preset(config)?;
    let (lex, canon) = resolve(cwd, path);
    let both = [&lex, &canon];
    let mut hidden: Vec<String> = preset.read_deny.clone();
    hidden.extend(token::key_path().map(|k| k.display().to_string()));
    if let Some(d) = hidden.iter().find(|d| both.iter().any(|p| in_or_under(p, d))) {
        return Some(format!("`{}` is unreadable in the `{}` sandbox (`{d}`)", lex.display(), preset.name));
    }
    if contents_below {
        let inside = hidden
            .iter()
            .filter(|d| !d.contains(['*', '?', '[']))
            .find(|d| both.iter().any(|p| Path::new(d.as_str()).starts_with(p)));
        if let Some(d) = inside {
            return Some(format!("searching `{}` would read `{d}`, which the `{}` sandbox hides; search a narrower path", lex.display(), preset.name));
        }
    }
    None
}
