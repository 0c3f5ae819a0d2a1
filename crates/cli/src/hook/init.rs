//! `pinfold init`: install `pinfold hook <agent>` into an agent's settings file.
//!
//! The file is read as JSON, the hook entry inserted (or its command updated in place), and
//! the file written back pretty-printed with its keys in their original order; everything else
//! in it is kept. Running it twice changes nothing. A file that is not valid JSON (JSON with
//! comments included) is refused, never overwritten.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::agent::AgentName;
use super::wrapper;
use pinfold_plan::Error;

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The agent to install the hook for; without it, every agent whose settings directory
    /// exists in the scope (`.claude`, `.codex`, `.gemini`, `.cursor`, `.github/hooks`; in the
    /// home directory `~/.claude`, `~/.codex`, `~/.gemini`, `~/.cursor`, `~/.copilot`).
    #[arg(long, value_enum)]
    agent: Option<AgentName>,
    /// Where to install: the project's settings (the git root, else the working directory) or
    /// the user's.
    #[arg(long, value_enum, default_value_t = Scope::Project)]
    scope: Scope,
    /// The project directory (default: the working directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Install even though this pinfold lies in a build directory (a cargo `target`
    /// directory, or one marked by CACHEDIR.TAG), with a warning: `cargo clean` or a rebuild
    /// elsewhere removes it, and every call is then refused until `pinfold init` runs again.
    #[arg(long)]
    allow_build_path: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    Project,
    User,
}

const ALL: [AgentName; 5] = [AgentName::ClaudeCode, AgentName::Codex, AgentName::Gemini, AgentName::Cursor, AgentName::Copilot];

impl AgentName {
    /// The directory whose existence says the agent is used here.
    fn marker(self, base: &Path, scope: Scope) -> PathBuf {
        match (self, scope) {
            (AgentName::ClaudeCode, _) => base.join(".claude"),
            (AgentName::Codex, Scope::User) => codex_home(base),
            (AgentName::Codex, Scope::Project) => base.join(".codex"),
            (AgentName::Gemini, _) => base.join(".gemini"),
            (AgentName::Cursor, _) => base.join(".cursor"),
            (AgentName::Copilot, Scope::Project) => base.join(".github/hooks"),
            (AgentName::Copilot, Scope::User) => copilot_home(base),
        }
    }

    /// The settings file the hook goes into.
    fn file(self, base: &Path, scope: Scope) -> PathBuf {
        match (self, scope) {
            (AgentName::ClaudeCode, _) => base.join(".claude/settings.json"),
            (AgentName::Codex, Scope::User) => codex_home(base).join("hooks.json"),
            (AgentName::Codex, Scope::Project) => base.join(".codex/hooks.json"),
            (AgentName::Gemini, _) => base.join(".gemini/settings.json"),
            (AgentName::Cursor, _) => base.join(".cursor/hooks.json"),
            (AgentName::Copilot, Scope::Project) => base.join(".github/hooks/pinfold.json"),
            (AgentName::Copilot, Scope::User) => copilot_home(base).join("settings.json"),
        }
    }

    /// The path of keys to the array of hook groups, and the group to put there.
    fn entry(self, command: &str) -> (Vec<&'static str>, Json) {
        let s = |x: &str| Json::Str(x.to_string());
        let obj = |kv: Vec<(&str, Json)>| Json::Obj(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
        match self {
            AgentName::ClaudeCode => (
                vec!["hooks", "PreToolUse"],
                obj(vec![
                    ("matcher", s("Bash|Write|Edit|MultiEdit|NotebookEdit|Read|Grep|Glob")),
                    ("hooks", Json::Arr(vec![obj(vec![("type", s("command")), ("command", s(command))])])),
                ]),
            ),
            AgentName::Codex => (
                vec!["hooks", "PreToolUse"],
                obj(vec![
                    ("matcher", s("Bash|apply_patch")),
                    ("hooks", Json::Arr(vec![obj(vec![("type", s("command")), ("command", s(command))])])),
                ]),
            ),
            AgentName::Gemini => (
                vec!["hooks", "BeforeTool"],
                obj(vec![
                    (
                        "matcher",
                        s("run_shell_command|write_file|replace|read_file|read_many_files|list_directory|glob|search_file_content|grep_search"),
                    ),
                    (
                        "hooks",
                        Json::Arr(vec![obj(vec![("name", s("pinfold")), ("type", s("command")), ("command", s(command))])]),
                    ),
                ]),
            ),
            // Cursor's preToolUse and beforeReadFile get the same entry; see `install`.
            AgentName::Cursor => (vec!["hooks", "preToolUse"], obj(vec![("command", s(command)), ("failClosed", Json::Bool(true))])),
            AgentName::Copilot => (
                vec!["hooks", "preToolUse"],
                obj(vec![("type", s("command")), ("bash", s(command)), ("timeoutSec", Json::Num("30".into()))]),
            ),
        }
    }
}

fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()).map_or_else(|| home.join(".codex"), PathBuf::from)
}

fn copilot_home(home: &Path) -> PathBuf {
    std::env::var_os("COPILOT_HOME").filter(|v| !v.is_empty()).map_or_else(|| home.join(".copilot"), PathBuf::from)
}

pub fn run(args: InitArgs, dirs: &pinfold_plan::Dirs) -> Result<i32, Error> {
    let cwd = match &args.cwd {
        Some(d) => crate::absolute(d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let base = match args.scope {
        Scope::Project => cwd.ancestors().find(|d| d.join(".git").exists()).unwrap_or(&cwd).to_path_buf(),
        Scope::User => dirs.home.clone().ok_or_else(|| Error::new("HOME is not set; cannot find the user's settings"))?,
    };
    let agents: Vec<AgentName> = match args.agent {
        Some(a) => vec![a],
        None => {
            let found: Vec<AgentName> = ALL.into_iter().filter(|a| a.marker(&base, args.scope).is_dir()).collect();
            if found.is_empty() {
                return Err(Error::new(format!("no agent settings found in {}", base.display())).hint(
                    "name one: pinfold init --agent claude-code|codex|gemini|cursor|copilot [--scope project|user]",
                ));
            }
            found
        }
    };
    let exe = std::env::current_exe().map_err(|e| Error::new("cannot find the pinfold binary").cause(e))?;
    if let Some(why) = wrapper::build_dir(&exe) {
        if !args.allow_build_path {
            return Err(Error::new(format!("refusing to install {} as the hook: {why}", exe.display())).hint(
                "install pinfold where it stays (`cargo install --path crates/cli`, then run the installed `pinfold init`), \
                 or pass --allow-build-path to install this one anyway",
            ));
        }
        eprintln!(
            "pinfold init: WARNING: {} lies in a build directory: {why}. Once it is gone, the hook refuses every call \
             (it fails closed) until `pinfold init` runs again; `pinfold doctor` tells",
            exe.display()
        );
    }
    for a in agents {
        let file = a.file(&base, args.scope);
        let command = wrapper::command(a, &exe);
        if a == AgentName::Codex && codex_inline_hooks(&file, &command)? {
            continue;
        }
        let changed = install(a, &file, &command)?;
        println!("{}: {} {}", a.name(), if changed { "installed in" } else { "already installed in" }, file.display());
    }
    Ok(crate::exit::OK)
}

/// Codex also reads hooks from inline `[hooks]` tables of the `config.toml` beside `hooks.json`
/// (the same layer), runs the hooks of both files, and warns when a layer has both. pinfold
/// does not edit TOML (it would lose the person's comments and layout), so: when `config.toml`
/// already runs `pinfold hook codex`, say so and leave both files alone (true: done); when it
/// declares other hooks, install in `hooks.json` as usual and print the TOML to move pinfold's
/// entry into `config.toml` by hand (false: go on).
fn codex_inline_hooks(hooks_json: &Path, command: &str) -> Result<bool, Error> {
    let file = hooks_json.with_file_name("config.toml");
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::new(format!("cannot read {}", file.display())).cause(e)),
    };
    let inline = scan_toml_hooks(&text);
    if let Some(ours) = inline.commands.iter().find(|c| is_ours(c, AgentName::Codex)) {
        println!("codex: already installed in {} (inline [hooks])", file.display());
        if ours != command {
            let fails_open = wrapper::recognise(ours, AgentName::Codex).is_some_and(|r| r.form == wrapper::Form::Bare);
            eprintln!(
                "pinfold init: note: its command there is `{ours}`{}; pinfold does not edit config.toml: replace that line by hand with\n\ncommand = {}\n",
                if fails_open { ", which lets every call through when pinfold cannot run" } else { ", not this pinfold's" },
                serde_json::to_string(command).expect("a string serialises")
            );
        }
        let in_json = std::fs::read_to_string(hooks_json).ok().and_then(|t| parse(&t).ok()).is_some_and(|j| {
            let groups = j.get("hooks").and_then(|h| h.get("PreToolUse"));
            let Some(Json::Arr(groups)) = groups else { return false };
            groups.iter().filter_map(|g| if let Some(Json::Arr(hs)) = g.get("hooks") { Some(hs) } else { None }).flatten().any(|h| {
                h.get("command").and_then(Json::as_str).is_some_and(|c| is_ours(c, AgentName::Codex))
            })
        });
        if in_json {
            eprintln!(
                "pinfold init: note: {} runs pinfold too; Codex runs the hooks of both files, so remove one of the two entries",
                hooks_json.display()
            );
        }
        return Ok(true);
    }
    if inline.events {
        let cmd = serde_json::to_string(command).expect("a string serialises");
        eprintln!(
            "pinfold init: note: {} declares hooks inline too; Codex runs the hooks of both files and warns \"loading hooks from both …; prefer a single representation for this layer\". \
             To keep one, move pinfold's entry from {} into it:\n\n[[hooks.PreToolUse]]\nmatcher = \"Bash|apply_patch\"\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = {cmd}\n",
            file.display(),
            hooks_json.display()
        );
    }
    Ok(false)
}

/// What the `[hooks]` of a Codex `config.toml` holds, read line by line (enough for the layouts
/// Codex documents; pinfold only reads the file).
#[derive(Debug, Default, PartialEq)]
struct TomlHooks {
    /// Some event has hooks (`[hooks.state]`, where Codex keeps hook trust, is not an event).
    events: bool,
    /// The `command` strings under `hooks`.
    commands: Vec<String>,
}

fn scan_toml_hooks(text: &str) -> TomlHooks {
    const EVENTS: [&str; 8] = ["PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact", "SessionStart", "UserPromptSubmit", "Stop"];
    let mut out = TomlHooks::default();
    let mut table: Vec<String> = Vec::new();
    let key_path = |k: &str| -> Vec<String> { k.split('.').map(|p| p.trim().trim_matches(['"', '\'']).to_string()).collect() };
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        // A table header (not a line of a multi-line array): `[a.b]`, `[[a.b]]`, `[a."b c"]`.
        let name = t.trim_start_matches('[').split(']').next().unwrap_or_default();
        if t.starts_with('[') && !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || "_-. \"'".contains(c)) {
            table = key_path(name);
            if table.first().is_some_and(|h| h == "hooks") && table.get(1).is_some_and(|e| e != "state") {
                out.events = true;
            }
            continue;
        }
        // A `key = value` line: its full key path.
        let mut full = table.clone();
        if let Some((k, v)) = t.split_once('=')
            && !k.trim_start().starts_with(['{', '"', '\''])
        {
            full.extend(key_path(k));
            if full.first().is_some_and(|h| h == "hooks") {
                let event = full.get(1).is_some_and(|e| e != "state");
                if event || EVENTS.iter().any(|e| v.contains(e)) {
                    out.events = true;
                }
            }
        }
        if table.first().is_some_and(|h| h == "hooks") || full.first().is_some_and(|h| h == "hooks") {
            out.commands.extend(command_values(t));
        }
    }
    out
}

/// The string values of `command = …` in a line (also inside an inline table).
fn command_values(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("command") {
        let before_ok = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric() && rest.as_bytes()[i - 1] != b'_';
        let after = rest[i + "command".len()..].trim_start();
        rest = &rest[i + "command".len()..];
        let Some(v) = after.strip_prefix('=').map(str::trim_start).filter(|_| before_ok) else { continue };
        let value = if let Some(lit) = v.strip_prefix('\'') {
            lit.split('\'').next().map(str::to_string)
        } else if v.starts_with('"') {
            // A basic string: JSON's escapes are TOML's, but for the rare \e and \U.
            let mut end = 1;
            let b = v.as_bytes();
            while end < b.len() && b[end] != b'"' {
                end += if b[end] == b'\\' { 2 } else { 1 };
            }
            v.get(..=end).and_then(|s| serde_json::from_str::<String>(s).ok())
        } else {
            None
        };
        out.extend(value);
    }
    out
}

/// Put the hook for `agent` into `file`; whether the file changed.
pub fn install(agent: AgentName, file: &Path, command: &str) -> Result<bool, Error> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::new(format!("cannot read {}", file.display())).cause(e)),
    };
    let mut root = match text.as_deref().map(str::trim) {
        None | Some("") => Json::Obj(Vec::new()),
        Some(t) => parse(t).map_err(|e| {
            Error::new(format!("{} is not valid JSON; leaving it untouched", file.display()))
                .cause(e)
                .hint("fix the file (comments are not accepted) or add the hook by hand: see docs/hooks.md")
        })?,
    };
    let Json::Obj(_) = root else {
        return Err(Error::new(format!("{} does not hold a JSON object; leaving it untouched", file.display())));
    };
    // Hook files of Cursor and Copilot carry a version; Copilot's settings.json does not.
    let hook_file = file.file_name().is_some_and(|n| n != "settings.json");
    if matches!(agent, AgentName::Cursor | AgentName::Copilot) && hook_file && root.get("version").is_none() {
        root.set("version", Json::Num("1".into()));
    }
    let (path, entry) = agent.entry(command);
    let mut events = vec![path[1]];
    if agent == AgentName::Cursor {
        events.push("beforeReadFile");
    }
    for ev in &events {
        let hooks = root.child(path[0], file)?;
        let list = hooks.child_arr(ev, file)?;
        upsert(list, &entry, agent)?;
    }
    // pinfold's entries under other events (put there by hand, e.g. Cursor's
    // beforeShellExecution) get the same command: one that fails closed.
    if let Some(Json::Obj(all)) = root.get_mut(path[0]) {
        for (_, list) in all.iter_mut().filter(|(ev, _)| !events.contains(&ev.as_str())) {
            if let Json::Arr(list) = list {
                update_ours(list, command, agent);
            }
        }
    }
    let mut out = String::new();
    print(&root, 0, &mut out);
    out.push('\n');
    if text.as_deref() == Some(out.as_str()) {
        return Ok(false);
    }
    if let Some(t) = &text
        && parse(t).ok().as_ref() == Some(&root)
    {
        // Same content, other formatting: leave the person's formatting alone.
        return Ok(false);
    }
    write(file, &out)?;
    Ok(true)
}

/// Whether `cmd` runs `pinfold hook <agent>`: the wrapper `init` writes, or the bare form of
/// earlier releases (both are upgraded in place).
fn is_ours(cmd: &str, agent: AgentName) -> bool {
    wrapper::recognise(cmd, agent).is_some()
}

/// Update our entry in `list` (a group whose command is ours), or append `entry`.
fn upsert(list: &mut Vec<Json>, entry: &Json, agent: AgentName) -> Result<(), Error> {
    let cmd_key = if agent == AgentName::Copilot { "bash" } else { "command" };
    for g in list.iter_mut() {
        // Claude Code, Codex and Gemini nest commands in `hooks`; Cursor and Copilot do not.
        if let Some(Json::Arr(inner)) = g.get_mut("hooks") {
            for h in inner.iter_mut() {
                if h.get(cmd_key).and_then(Json::as_str).is_some_and(|c| is_ours(c, agent)) {
                    let want = entry.get("hooks").and_then(|x| if let Json::Arr(a) = x { a.first() } else { None });
                    if let Some(Json::Str(c)) = want.and_then(|w| w.get(cmd_key)) {
                        h.set(cmd_key, Json::Str(c.clone()));
                    }
                    return Ok(());
                }
            }
        } else if g.get(cmd_key).and_then(Json::as_str).is_some_and(|c| is_ours(c, agent)) {
            if let Some(Json::Str(c)) = entry.get(cmd_key) {
                g.set(cmd_key, Json::Str(c.clone()));
            }
            return Ok(());
        }
    }
    list.push(entry.clone());
    Ok(())
}

/// Set the command of every entry of ours in `list` to `command`.
fn update_ours(list: &mut [Json], command: &str, agent: AgentName) {
    let cmd_key = if agent == AgentName::Copilot { "bash" } else { "command" };
    let fix = |h: &mut Json| {
        if h.get(cmd_key).and_then(Json::as_str).is_some_and(|c| is_ours(c, agent) && c != command) {
            h.set(cmd_key, Json::Str(command.to_string()));
        }
    };
    for g in list.iter_mut() {
        if let Some(Json::Arr(inner)) = g.get_mut("hooks") {
            inner.iter_mut().for_each(fix);
        } else {
            fix(g);
        }
    }
}

fn write(file: &Path, text: &str) -> Result<(), Error> {
    let dir = file.parent().ok_or_else(|| Error::new(format!("{} has no directory", file.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::new(format!("cannot create {}", dir.display())).cause(e))?;
    let tmp = dir.join(format!(".{}.pinfold-tmp", file.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    std::fs::write(&tmp, text).map_err(|e| Error::new(format!("cannot write {}", tmp.display())).cause(e))?;
    if let Ok(meta) = std::fs::metadata(file) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    // Write through a symlinked settings file (dotfiles) instead of replacing the link.
    let target = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    std::fs::rename(&tmp, &target).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::new(format!("cannot write {}", target.display())).cause(e)
    })
}

// ---------------------------------------------------------------------------------------------
// `pinfold doctor`: the installed hooks.
// ---------------------------------------------------------------------------------------------

/// One pinfold hook entry (or its absence) for one agent in one scope.
#[derive(Debug, serde::Serialize)]
pub struct HookRow {
    pub agent: &'static str,
    pub scope: &'static str,
    /// `guarded`, `blocked` (every call refused), `unguarded` (every call let through),
    /// `fails-open` (guarded while the binary lasts), `unverified` (a wrapper of another
    /// shape), `not-installed` (the agent's directory exists, no pinfold hook),
    /// `not-in-use`.
    pub state: &'static str,
    pub file: Option<PathBuf>,
    pub event: Option<String>,
    pub command: Option<String>,
    pub binary: Option<String>,
    pub detail: String,
    pub fix: Option<String>,
    /// Whether this row makes `pinfold doctor` fail.
    pub problem: bool,
}

/// Every pinfold hook installed for each agent, in the project (`cwd`'s git root, else `cwd`)
/// and for the user, with whether it guards the agent now and whether it fails closed.
pub fn doctor_rows(cwd: &Path, dirs: &pinfold_plan::Dirs) -> Vec<HookRow> {
    let project = cwd.ancestors().find(|d| d.join(".git").exists()).unwrap_or(cwd).to_path_buf();
    let home = dirs.home.clone();
    let mut rows = Vec::new();
    for agent in ALL {
        let scopes: Vec<(Scope, &PathBuf)> = [(Scope::Project, Some(&project)), (Scope::User, home.as_ref())]
            .into_iter()
            .filter_map(|(s, b)| b.map(|b| (s, b)))
            .collect();
        let mut found: Vec<(Scope, Vec<HookRow>, PathBuf)> = Vec::new();
        for (scope, base) in scopes {
            let marker = agent.marker(base, scope);
            let mut here = Vec::new();
            let file = agent.file(base, scope);
            match installed_commands(&file, agent) {
                Ok(commands) => here.extend(commands.iter().map(|(event, command, idle)| {
                    let mut r = row(agent, scope, &file, event, command);
                    if let Some(why) = idle.clone().or_else(|| hooks_disabled(agent, base, scope)) {
                        r.state = "unguarded";
                        r.detail = format!("{why}, so every call runs unguarded ({})", r.detail);
                        r.problem = true;
                        r.fix = Some(format!("remove that setting, or run {}", init_fix(agent, scope)));
                    }
                    r
                })),
                Err(why) => here.push(HookRow {
                    agent: agent.name(),
                    scope: scope_name(scope),
                    state: "unverified",
                    file: Some(file.clone()),
                    event: None,
                    command: None,
                    binary: None,
                    detail: format!("{why}; it mentions pinfold, so check its hook entries by hand"),
                    fix: Some("make the file strict JSON, then run pinfold doctor again".into()),
                    problem: true,
                }),
            }
            if agent == AgentName::Codex {
                let toml = file.with_file_name("config.toml");
                if let Ok(text) = std::fs::read_to_string(&toml) {
                    for command in scan_toml_hooks(&text).commands.iter().filter(|c| is_ours(c, agent)) {
                        here.push(row(agent, scope, &toml, "PreToolUse (config.toml)", command));
                    }
                }
            }
            found.push((scope, here, marker));
        }
        let installed_somewhere = found.iter().any(|(_, h, _)| !h.is_empty());
        for (scope, here, marker) in found {
            let scope_name = scope_name(scope);
            if !here.is_empty() {
                rows.extend(here);
            } else {
                let (state, detail, problem) = match (marker.is_dir(), installed_somewhere) {
                    (true, false) => ("not-installed", format!("{} exists and has no pinfold hook: its calls run unguarded", marker.display()), true),
                    (true, true) => ("not-installed", "no pinfold hook in this scope (there is one in the other)".to_string(), false),
                    (false, _) => ("not-in-use", "no settings directory".to_string(), false),
                };
                rows.push(HookRow {
                    agent: agent.name(),
                    scope: scope_name,
                    state,
                    file: None,
                    event: None,
                    command: None,
                    binary: None,
                    detail,
                    fix: problem.then(|| init_fix(agent, scope)),
                    problem,
                });
            }
        }
    }
    rows
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Project => "project",
        Scope::User => "user",
    }
}

fn init_fix(agent: AgentName, scope: Scope) -> String {
    let s = if scope == Scope::User { " --scope user" } else { "" };
    format!("pinfold init --agent {}{s} (run by an installed pinfold, e.g. after `cargo install --path crates/cli`)", agent.name())
}

/// The (event, command) of every pinfold entry for `agent` in the JSON settings `file`, under
/// any event (a hand-made entry may sit elsewhere than where `init` puts it). `Err` when the
/// file mentions pinfold but is not strict JSON (Copilot's settings.json may hold comments).
fn installed_commands(file: &Path, agent: AgentName) -> Result<Vec<(String, String, Option<String>)>, String> {
    let Ok(text) = std::fs::read_to_string(file) else { return Ok(Vec::new()) };
    let root = match parse(&text) {
        Ok(root) => root,
        Err(e) if text.contains("pinfold") => return Err(format!("{} is not strict JSON ({e})", file.display())),
        Err(_) => return Ok(Vec::new()),
    };
    let Some(Json::Obj(events)) = root.get("hooks") else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (event, groups) in events {
        let Json::Arr(groups) = groups else { continue };
        for g in groups {
            let mut entries = vec![g];
            if let Some(Json::Arr(inner)) = g.get("hooks") {
                entries = inner.iter().collect();
            }
            for h in entries {
                for key in ["command", "bash"] {
                    if let Some(c) = h.get(key).and_then(Json::as_str)
                        && is_ours(c, agent)
                    {
                        out.push((event.clone(), c.to_string(), idle_entry(agent, event, g, h)));
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Why a pinfold entry, whatever its command, never sees the calls it must judge: under an
/// event the agent does not run before a shell command, behind a matcher that does not select
/// the shell tool, or with a timeout shorter than pinfold's answer may take. `None` when it
/// sees them (or pinfold cannot tell, which the matcher's text then says).
fn idle_entry(agent: AgentName, event: &str, group: &Json, entry: &Json) -> Option<String> {
    let (events, tool): (&[&str], &str) = match agent {
        AgentName::ClaudeCode | AgentName::Codex => (&["PreToolUse"], "Bash"),
        AgentName::Gemini => (&["BeforeTool"], "run_shell_command"),
        AgentName::Cursor => (&["preToolUse", "beforeShellExecution", "beforeReadFile"], "Shell"),
        AgentName::Copilot => (&["preToolUse"], "bash"),
    };
    if !events.contains(&event) {
        return Some(format!("it sits under `{event}`, which the agent does not run before a tool call ({})", events.join(" or ")));
    }
    let matcher = entry.get("matcher").or_else(|| group.get("matcher")).and_then(Json::as_str);
    if let Some(m) = matcher
        && !matches!(event, "beforeShellExecution" | "beforeReadFile")
        && !matcher_selects(m, tool)
    {
        return Some(format!("its matcher `{m}` does not select the `{tool}` tool"));
    }
    // An answer takes at most the hook's default budget and a moment to record a failure.
    let least = super::DEFAULT_BUDGET.as_secs() + 2;
    for key in ["timeoutSec", "timeout"] {
        let Some(Json::Num(n)) = entry.get(key) else { continue };
        let secs = match (key, n.parse::<f64>()) {
            ("timeout", Ok(v)) if agent == AgentName::Gemini => v / 1000.0,
            (_, Ok(v)) => v,
            _ => continue,
        };
        if secs < least as f64 {
            return Some(format!("its `{key}` ({n}) is shorter than pinfold may take ({least} s): the agent lets the call through when it runs out"));
        }
    }
    None
}

/// Whether an agent's hook matcher selects `tool`: empty, `*`, `.*`, or a `|` list naming it.
/// A pattern pinfold cannot read that way (other regular-expression syntax) counts as not
/// selecting it: doctor then says so rather than vouch for it.
fn matcher_selects(m: &str, tool: &str) -> bool {
    let m = m.trim();
    matches!(m, "" | "*" | ".*") || m.split('|').any(|alt| alt.trim() == tool || alt.trim() == format!("^{tool}$"))
}

/// Why `agent` runs no hook at all from the settings in `base` (`scope`): Claude Code's
/// `disableAllHooks`, in any of its settings files there.
fn hooks_disabled(agent: AgentName, base: &Path, scope: Scope) -> Option<String> {
    if agent != AgentName::ClaudeCode {
        return None;
    }
    let files: Vec<PathBuf> = match scope {
        Scope::Project => vec![base.join(".claude/settings.json"), base.join(".claude/settings.local.json")],
        Scope::User => vec![base.join(".claude/settings.json")],
    };
    files.into_iter().find_map(|f| {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).ok()?).ok()?;
        (v.get("disableAllHooks") == Some(&serde_json::Value::Bool(true)))
            .then(|| format!("{} sets `disableAllHooks`: Claude Code runs no hook", f.display()))
    })
}

fn row(agent: AgentName, scope: Scope, file: &Path, event: &str, command: &str) -> HookRow {
    let r = wrapper::recognise(command, agent).expect("only pinfold's commands come here");
    let runs = r.binary.as_deref().map(wrapper::runnable);
    let name = agent_title(agent);
    let (state, mut detail, problem) = match (&r.form, &runs) {
        (_, None) => ("unverified", "cannot tell which binary this command runs".to_string(), true),
        (wrapper::Form::Wrapped, Some(Ok(p))) => ("guarded", format!("{} runs, and the command fails closed", p.display()), false),
        (wrapper::Form::Wrapped, Some(Err(why))) => ("blocked", format!("{why}: {name} refuses every call until pinfold is reinstalled"), true),
        (wrapper::Form::OtherWrapper, Some(Ok(p))) => ("unverified", format!("{} runs, but the command is not the wrapper this pinfold writes: whether it fails closed is unknown", p.display()), true),
        (wrapper::Form::OtherWrapper, Some(Err(why))) => ("unverified", format!("{why}, and the command is not the wrapper this pinfold writes"), true),
        (wrapper::Form::Bare, Some(Ok(p))) => ("fails-open", format!("{} runs, but the command does not fail closed: if it goes, {name} runs every call unguarded", p.display()), true),
        (wrapper::Form::Bare, Some(Err(why))) if agent == AgentName::Cursor => {
            ("unguarded", format!("{why}: the shell exits 126 or 127, which Cursor lets through unless the entry says \"failClosed\": true"), true)
        }
        (wrapper::Form::Bare, Some(Err(why))) => ("unguarded", format!("{why}: the shell exits 126 or 127, which {name} does not read as a block, so every call runs unguarded"), true),
    };
    if let Some(Ok(p)) = &runs
        && let Some(why) = wrapper::build_dir(p)
    {
        detail.push_str(&format!("; note: {why}"));
    }
    HookRow {
        agent: agent.name(),
        scope: scope_name(scope),
        state,
        file: Some(file.to_path_buf()),
        event: Some(event.to_string()),
        command: Some(command.to_string()),
        binary: r.binary.clone(),
        detail,
        fix: problem.then(|| init_fix(agent, scope)),
        problem,
    }
}

fn agent_title(agent: AgentName) -> &'static str {
    match agent {
        AgentName::ClaudeCode => "Claude Code",
        AgentName::Codex => "Codex",
        AgentName::Gemini => "Gemini CLI",
        AgentName::Cursor => "Cursor",
        AgentName::Copilot => "Copilot CLI",
    }
}

// ---------------------------------------------------------------------------------------------
// JSON that keeps its keys in order (serde_json's map sorts them).
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The number's text as written.
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn get(&self, k: &str) -> Option<&Json> {
        match self {
            Json::Obj(kv) => kv.iter().find(|(key, _)| key == k).map(|(_, v)| v),
            _ => None,
        }
    }

    fn get_mut(&mut self, k: &str) -> Option<&mut Json> {
        match self {
            Json::Obj(kv) => kv.iter_mut().find(|(key, _)| key == k).map(|(_, v)| v),
            _ => None,
        }
    }

    fn set(&mut self, k: &str, v: Json) {
        if let Json::Obj(kv) = self {
            match kv.iter_mut().find(|(key, _)| key == k) {
                Some(slot) => slot.1 = v,
                None => kv.push((k.to_string(), v)),
            }
        }
    }

    fn as_str(&self) -> Option<&str> {
        if let Json::Str(s) = self { Some(s) } else { None }
    }

    /// The object under `k`, created when missing.
    fn child(&mut self, k: &str, file: &Path) -> Result<&mut Json, Error> {
        if self.get(k).is_none() {
            self.set(k, Json::Obj(Vec::new()));
        }
        match self.get_mut(k) {
            Some(v @ Json::Obj(_)) => Ok(v),
            _ => Err(Error::new(format!("`{k}` in {} is not a JSON object; leaving the file untouched", file.display()))),
        }
    }

    /// The array under `k`, created when missing.
    fn child_arr(&mut self, k: &str, file: &Path) -> Result<&mut Vec<Json>, Error> {
        if self.get(k).is_none() {
            self.set(k, Json::Arr(Vec::new()));
        }
        match self.get_mut(k) {
            Some(Json::Arr(a)) => Ok(a),
            _ => Err(Error::new(format!("`hooks.{k}` in {} is not a JSON array; leaving the file untouched", file.display()))),
        }
    }
}

/// Parse strict JSON (validated by serde_json first), keeping key order; duplicate keys are an
/// error.
pub fn parse(text: &str) -> Result<Json, String> {
    serde_json::from_str::<serde_json::Value>(text).map_err(|e| e.to_string())?;
    let b = text.as_bytes();
    let mut i = 0;
    let v = value(text, b, &mut i)?;
    skip_ws(b, &mut i);
    if i != b.len() {
        return Err("trailing characters".into());
    }
    Ok(v)
}

fn skip_ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
        *i += 1;
    }
}

fn string(text: &str, b: &[u8], i: &mut usize) -> Result<String, String> {
    let start = *i;
    *i += 1;
    while *i < b.len() && b[*i] != b'"' {
        *i += if b[*i] == b'\\' { 2 } else { 1 };
    }
    *i += 1;
    serde_json::from_str(&text[start..*i]).map_err(|e| e.to_string())
}

fn value(text: &str, b: &[u8], i: &mut usize) -> Result<Json, String> {
    skip_ws(b, i);
    match b.get(*i) {
        Some(b'{') => {
            *i += 1;
            let mut kv: Vec<(String, Json)> = Vec::new();
            loop {
                skip_ws(b, i);
                if b.get(*i) == Some(&b'}') {
                    *i += 1;
                    return Ok(Json::Obj(kv));
                }
                if b.get(*i) == Some(&b',') {
                    *i += 1;
                    skip_ws(b, i);
                }
                let k = string(text, b, i)?;
                if kv.iter().any(|(x, _)| *x == k) {
                    return Err(format!("duplicate key `{k}`"));
                }
                skip_ws(b, i);
                *i += 1; // ':'
                let v = value(text, b, i)?;
                kv.push((k, v));
            }
        }
        Some(b'[') => {
            *i += 1;
            let mut a = Vec::new();
            loop {
                skip_ws(b, i);
                match b.get(*i) {
                    Some(b']') => {
                        *i += 1;
                        return Ok(Json::Arr(a));
                    }
                    Some(b',') => *i += 1,
                    _ => a.push(value(text, b, i)?),
                }
            }
        }
        Some(b'"') => string(text, b, i).map(Json::Str),
        Some(b't') => {
            *i += 4;
            Ok(Json::Bool(true))
        }
        Some(b'f') => {
            *i += 5;
            Ok(Json::Bool(false))
        }
        Some(b'n') => {
            *i += 4;
            Ok(Json::Null)
        }
        Some(_) => {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                *i += 1;
            }
            Ok(Json::Num(text[start..*i].to_string()))
        }
        None => Err("unexpected end".into()),
    }
}

/// Pretty-print with two-space indentation.
pub fn print(v: &Json, indent: usize, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(n) => out.push_str(n),
        Json::Str(s) => out.push_str(&serde_json::to_string(s).expect("a string serialises")),
        Json::Arr(a) if a.is_empty() => out.push_str("[]"),
        Json::Obj(kv) if kv.is_empty() => out.push_str("{}"),
        Json::Arr(a) => {
            out.push_str("[\n");
            for (n, x) in a.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                print(x, indent + 1, out);
                out.push_str(if n + 1 < a.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        Json::Obj(kv) => {
            out.push_str("{\n");
            for (n, (k, x)) in kv.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                out.push_str(&serde_json::to_string(k).expect("a string serialises"));
                out.push_str(": ");
                print(x, indent + 1, out);
                out.push_str(if n + 1 < kv.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_hooks_documented_layout() {
        let t = "[features]\nhooks = true\n\n[[hooks.PreToolUse]]\nmatcher = \"^Bash$\"\n\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = '/usr/bin/python3 \"$(git rev-parse --show-toplevel)/.codex/hooks/p.py\"'\ntimeout = 30\n";
        let h = scan_toml_hooks(t);
        assert!(h.events);
        assert_eq!(h.commands, ["/usr/bin/python3 \"$(git rev-parse --show-toplevel)/.codex/hooks/p.py\""]);
    }

    #[test]
    fn toml_hooks_state_and_feature_flag_are_not_hooks() {
        let t = "model = \"gpt-5\"\n[features]\nhooks = true\ncommand = \"not a hook\"\n\n[hooks.state.\"/home/u/.codex/hooks.json:pre_tool_use:0:0\"]\nenabled = true\ntrusted_hash = \"abc\"\n";
        assert_eq!(scan_toml_hooks(t), TomlHooks::default());
    }

    #[test]
    fn toml_hooks_other_shapes() {
        // Dotted keys at the root, an inline table, a basic string with escapes, a Windows
        // override that is not `command`.
        let t = "hooks.Stop = [{ hooks = [{ type = \"command\", command = \"say \\\"done\\\"\", commandWindows = \"x\" }] }]\n";
        let h = scan_toml_hooks(t);
        assert!(h.events);
        assert_eq!(h.commands, ["say \"done\""]);
        let t = "[hooks]\nPreToolUse = [\n  { matcher = \"Bash\", hooks = [{ type = \"command\", command = \"'/opt/pinfold' hook codex\" }] },\n]\n";
        let h = scan_toml_hooks(t);
        assert!(h.events);
        assert!(is_ours(&h.commands[0], AgentName::Codex), "{h:?}");
    }
}
