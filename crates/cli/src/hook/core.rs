//! The part of `pinfold hook` every agent shares: the working directory of a call, the
//! verdict on a shell command with its rewrite (`rewrite`) and tokens (`token`), and the checks
//! on file paths an agent's own read and write tools touch. Each agent's module only converts
//! its JSON to these calls and the answers back.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use pinfold_plan::{control, protect, record, Dirs};
use pinfold_policy::config::{Action, Audit, Config, SandboxPreset};
use pinfold_policy::matcher::{in_or_under, normalize};
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

/// The default sandbox preset, if the policy has one.
pub fn default_preset(config: &Config) -> Option<&SandboxPreset> {
    config.defaults.sandbox.as_deref().and_then(|n| config.sandboxes.get(n))
}

/// `p` made absolute against `cwd` (with `~` expanded) and normalised, and the path the kernel
/// would reach: every existing part resolved through symlinks *before* a `..` after it is
/// applied (`link/../x` is the parent of the link's target, not `x` beside the link), and a
/// symlink whose target does not exist yet followed to where a write would create it.
pub fn resolve(cwd: &Path, p: &str, home: Option<&Path>) -> (PathBuf, PathBuf) {
    let expanded = match (p.strip_prefix('~'), home) {
        (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(p),
    };
    let raw = cwd.join(expanded);
    (normalize(&raw), physical(&raw, 0))
}

/// Where the kernel would take the absolute path `raw` (see [`resolve`]); symlinks are followed
/// at most 40 deep, as the kernel does.
fn physical(raw: &Path, depth: usize) -> PathBuf {
    // `raw` and its ancestors, deepest first. Each try below costs the path's length, and a
    // deep path has as many ancestors as components: trying each in turn was quadratic.
    let ancestors: Vec<&Path> = raw.ancestors().collect();
    // The deepest that resolves, by bisection: resolving a path resolves its parent first, so
    // the ancestors that resolve are all those from some depth up.
    let (mut lo, mut hi) = (0, ancestors.len());
    let mut resolved = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match std::fs::canonicalize(ancestors[mid]) {
            Ok(c) => {
                resolved = Some(c);
                hi = mid;
            }
            Err(_) => lo = mid + 1,
        }
    }
    // `to` with the components of `raw` below `ancestors[i]` appended (a push each, not a copy
    // of the whole path each).
    let below = |mut to: PathBuf, i: usize| {
        for c in raw.components().skip(ancestors[i].components().count()) {
            to.push(c);
        }
        normalize(&to)
    };
    // A deeper ancestor that is a dangling symlink: a write through it creates its target. The
    // kernel reads no link through a path of PATH_MAX bytes or more.
    if depth < 40 {
        for (i, a) in ancestors[..hi].iter().enumerate() {
            if a.as_os_str().len() >= libc::PATH_MAX as usize {
                continue;
            }
            if let Ok(target) = std::fs::read_link(a) {
                let base = a.parent().unwrap_or(Path::new("/"));
                return below(physical(&base.join(target), depth + 1), i);
            }
        }
    }
    match resolved {
        Some(c) => below(c, hi),
        None => normalize(raw),
    }
}

/// Why the default sandbox could not write `path`; `None` when it could.
pub fn write_check(config: &Config, cwd: &Path, path: &str, dirs: &Dirs) -> Option<String> {
    let preset = default_preset(config)?;
    let (lex, canon) = resolve(cwd, path, dirs.home.as_deref());
    let both = [&lex, &canon];
    // pinfold's own files: its policy, configuration, cache, hook key and ledger (the same
    // list `pinfold exec` keeps read-only in its sandbox).
    let own = protect::own_unwritable(&config.files, dirs);
    if let Some(o) = own.iter().find(|o| both.iter().any(|p| p.starts_with(o))) {
        return Some(format!("`{}` is pinfold's own file ({}); agents may not change it", lex.display(), o.display()));
    }
    // A policy file anywhere, existing or not: one written in `sub/` would become the policy of
    // every later call made from there (docs/design/threat-model.md).
    if both.iter().any(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(protect::is_policy_file_name)) {
        return Some(format!("`{}` would be a pinfold policy file; agents may not write one", lex.display()));
    }
    // Files programs outside the sandbox run or obey later: agent settings, git's own files,
    // editor tasks, commit hooks (the same list `pinfold exec` keeps read-only).
    let root = config.project_root.as_path();
    if let Some(f) = both.iter().find_map(|p| control::is_control(root, cwd, dirs.home.as_deref(), &config.control_lift, p)) {
        return Some(format!("`{}` is a control file: {}; agents may not change it, a person does", lex.display(), f.why()));
    }
    // Through a link at a control file's name, made earlier (`.claude -> notes`): where it
    // points is that control file, whether or not it exists yet.
    for link in control::links(root, cwd, &config.control_lift) {
        let (_, target) = resolve(cwd, &link.to_string_lossy(), None);
        if canon.starts_with(&target) {
            return Some(format!("`{}` is where the control file `{}` points; agents may not change it, a person does", lex.display(), link.display()));
        }
    }
    if let Some(d) = preset.write_deny.iter().find(|d| both.iter().any(|p| in_or_under(p, d))) {
        return Some(format!("`{}` is write-protected in the `{}` sandbox (`{d}`)", lex.display(), preset.name));
    }
    if !preset.write_allow.iter().any(|a| in_or_under(&canon, a)) {
        // `pinfold exec` also opens the toolchain caches that exist and a worktree's git
        // directory to a preset that writes the project, for builds and `git commit`. The
        // agent's file tools get only the preset's own roots: an edit in a shared cache reaches
        // every project built from it, outside this project's history (docs/hooks.md).
        let root = config.project_root.as_path();
        if preset.write_allow.iter().any(|w| Path::new(w) == root) {
            let for_commands = protect::preset_writable(preset, root, dirs);
            if let Some(w) = for_commands.iter().filter(|w| !w.starts_with(root)).find(|w| canon.starts_with(w)) {
                return Some(format!(
                    "`{}` is in `{}`, which the `{}` sandbox opens to commands (builds, git) but not to the agent's file tools; change the project instead",
                    canon.display(),
                    w.display(),
                    preset.name
                ));
            }
        }
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
pub fn read_check(config: &Config, cwd: &Path, path: &str, contents_below: bool, dirs: &Dirs) -> Option<String> {
    let preset = default_preset(config)?;
    let (lex, canon) = resolve(cwd, path, dirs.home.as_deref());
    let both = [&lex, &canon];
    let mut hidden: Vec<String> = preset.read_deny.clone();
    hidden.extend(protect::own_unreadable(dirs).iter().map(|p| p.display().to_string()));
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
