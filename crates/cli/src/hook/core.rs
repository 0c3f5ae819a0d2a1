//! The part of `pinfold hook` every agent shares: the working directory of a call, the
//! verdict on a shell command with its rewrite (`rewrite`) and tokens (`token`), and the checks
//! on file paths an agent's own read and write tools touch. Each agent's module only converts
//! its JSON to these calls and the answers back.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use pinfold_plan::{record, Dirs};
use pinfold_policy::config::{Action, Audit, Config};

pub use pinfold_plan::files::{default_preset, read_check, resolve, write_check};
use serde_json::{json, Value};

use super::{rewrite, token};
use pinfold_plan::Error;

/// The call's working directory: `v` (a string) if given, else pinfold's own; made absolute and
/// resolved through symlinks. A directory that does not exist is an error.
pub fn cwd(v: Option<&Value>, field: &str) -> Result<PathBuf, Error> {
    let cwd = match v {
        None | Some(Value::Null) => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
        Some(Value::String(s)) => PathBuf::from(s),
        Some(_) => return Err(Error::new(format!("the hook input's `{field}` is not a string"))),
    };
    let cwd = crate::absolute(&cwd)?;
    std::fs::canonicalize(&cwd).map_err(|e| Error::new(format!("cannot resolve {}", cwd.display())).cause(e))
}

/// Why `dir`, a working directory the model chose for one call (Gemini CLI's `dir_path`,
/// Cursor's `tool_input.cwd`), may not be used: it is not inside the directory the agent's
/// session works in (`workspace`, resolved). A directory outside becomes the call's project,
/// with its own policy and sandbox roots (`dir_path: "/"` made the whole file system the
/// project); the session's own directory is what the person chose.
pub fn outside_workspace(dir: &Path, workspace: &[PathBuf]) -> Option<String> {
    if workspace.is_empty() {
        return Some(format!("the call asks to run in `{}`, and the hook input names no workspace to hold it to", dir.display()));
    }
    if workspace.iter().any(|w| dir.starts_with(w)) {
        return None;
    }
    let names: Vec<String> = workspace.iter().map(|w| w.display().to_string()).collect();
    Some(format!("the call asks to run in `{}`, outside the session's workspace ({}); run it from inside the project", dir.display(), names.join(", ")))
}

/// The verdict on a shell command and what to run instead.
#[derive(Debug)]
pub struct Shell {
    pub decision: Action,
    /// For a person, without the `pinfold: ` prefix.
    pub reason: String,
    /// The command to run (the original when nothing needs a sandbox); `None` on deny.
    pub command: Option<String>,
}

// --- what the hook decided, for the ledger (`hook::run` writes the record) ---

/// A decision this call made: the policy's `[audit]` settings and the record's payload.
#[derive(Debug)]
pub struct Decided {
    pub audit: Audit,
    pub data: Value,
}

thread_local! {
    static DECIDED: RefCell<Option<Decided>> = const { RefCell::new(None) };
}

fn decided(config: &Config, data: Value) {
    DECIDED.with(|d| *d.borrow_mut() = Some(Decided { audit: config.audit.clone(), data }));
}

/// The decision made since the last call, if any.
pub fn take_decided() -> Option<Decided> {
    DECIDED.with(|d| d.borrow_mut().take())
}

fn path_decision(config: &Config, cwd: &Path, tool_path: &str, why: &Option<String>) {
    let data = json!({
        "path": tool_path,
        "cwd": cwd.display().to_string(),
        "decision": if why.is_some() { Action::Deny } else { Action::Allow },
        "reason": why.as_deref().unwrap_or("the default sandbox could do the same"),
    });
    decided(config, data);
}

/// Judge `command` as run in `cwd` and rewrite it so that what needs a sandbox runs in one.
pub fn shell(dirs: &Dirs, command: &str, cwd: &Path) -> Result<Shell, Error> {
    let policy = crate::load_policy(None, Some(cwd), true, dirs)?;
    let j = policy.judge(command, cwd);
    let mut data = record::judgement(&j);
    data["command"] = command.into();
    data["cwd"] = cwd.display().to_string().into();
    if j.decision == Action::Deny {
        decided(policy.config(), data);
        return Ok(Shell { decision: Action::Deny, reason: j.reason.clone(), command: None });
    }
    let exe = std::env::current_exe().map_err(|e| Error::new("cannot find the pinfold binary").cause(e))?;
    let key = token::load_or_create_key(dirs).map_err(|e| Error::new(format!("cannot use the hook key: {e}")))?;
    let now = token::now();
    let plan = rewrite::plan(policy.config(), &j, command, &exe, &|text, preset| token::mint(&key, text, preset, cwd, now));
    let command = if plan.decision == Action::Deny { None } else { plan.command };
    data["decision"] = json!(plan.decision);
    data["reason"] = plan.reason.as_str().into();
    decided(policy.config(), data);
    Ok(Shell { decision: plan.decision, reason: plan.reason, command })
}

/// Why an agent's write tool may not write `path`; `None` when the default sandbox could.
pub fn write_denied(dirs: &Dirs, cwd: &Path, path: &str) -> Result<Option<String>, Error> {
    let policy = crate::load_policy(None, Some(cwd), true, dirs)?;
    let why = write_check(policy.config(), cwd, path, dirs);
    path_decision(policy.config(), cwd, path, &why);
    Ok(why)
}

/// Why an agent's read tool may not read `path` (everything below it when `contents_below`);
/// `None` when the default sandbox could.
pub fn read_denied(dirs: &Dirs, cwd: &Path, path: &str, contents_below: bool) -> Result<Option<String>, Error> {
    let policy = crate::load_policy(None, Some(cwd), true, dirs)?;
    let why = read_check(policy.config(), cwd, path, contents_below, dirs);
    path_decision(policy.config(), cwd, path, &why);
    Ok(why)
}

/// The directory a glob pattern starts in, when it names one (`/a/b/*.rs` → `/a/b/`); relative
/// patterns start in the search directory, already checked by the caller.
pub fn glob_root(pattern: &str) -> Option<String> {
    pattern
        .starts_with(['/', '~'])
        .then(|| pattern.chars().take_while(|c| !matches!(c, '*' | '?' | '[' | '{')).collect())
}

/// The answer an agent that cannot ask a person gives instead of ask: deny, saying how a person
/// can allow it.
pub fn ask_as_deny(agent: &str, reason: &str) -> String {
    format!(
        "{reason}. This needs a person's approval, and {agent} hooks cannot ask for it, so pinfold refuses it. \
         To allow it, run it yourself, or add an allow rule to pinfold.toml \
         (`pinfold check --explain -- '<command>'` shows which rules matched)"
    )
}

