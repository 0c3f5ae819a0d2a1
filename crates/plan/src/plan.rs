//! [`plan`]: a command, the context it runs in and the policy, turned into everything a run
//! does — the verdict, the sandbox with every path it protects, hides and opens, the network,
//! the argv, and what goes into the ledger — without starting or writing anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinfold_policy::config::{Action, Audit, Credential, SandboxPreset};
use pinfold_policy::{Judgement, Policy};
use pinfold_sandbox::{BackendKind, Network, Policy as SandboxPolicy};
use serde_json::Value;

use crate::git_guard::GitGuard;
use crate::{control, protect, record, Dirs};

/// `--net`: the network asked for on the command line, over the preset's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    Off,
    On,
}

/// What a run is asked for besides the command: where, and the options that change its
/// sandbox.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The working directory, absolute.
    pub cwd: PathBuf,
    /// The preset asked for (`a+b` merges presets `a` and `b`), over the one the policy picks.
    pub sandbox: Option<String>,
    /// More writable roots, relative to `cwd`.
    pub write: Vec<PathBuf>,
    /// Paths kept read-only even inside a writable root, relative to `cwd`.
    pub deny_write: Vec<PathBuf>,
    /// Paths hidden, relative to `cwd`.
    pub deny_read: Vec<PathBuf>,
    pub net: Option<Net>,
    /// Variables passed through even if they look like secrets.
    pub keep_env: Vec<String>,
    pub allow_degraded: bool,
    /// Resolve and show, run nothing.
    pub dry_run: bool,
    /// A hook token that verified for exactly this command, preset and directory: a person
    /// approved the command in the agent, so an *ask* runs (in the named sandbox). Never a
    /// *deny*.
    pub hook_origin: Option<String>,
    /// `$JAVA_TOOL_OPTIONS`, which the egress proxy's settings are appended to.
    pub java_tool_options: Option<String>,
    /// The backend asked for (`pinfold exec --backend`), over the preset's.
    pub backend: Option<BackendKind>,
    /// The container image asked for (`pinfold exec --image`), over the preset's `image`.
    pub image: Option<String>,
    /// The kept container to run in (`pinfold serve`, through `pinfold exec
    /// --keep-container`), when the run is on the container backend.
    pub keep_container: Option<String>,
    /// The working directory as the caller named it, links and all (`--cwd` as given, or the
    /// shell's `$PWD`), when that differs from `cwd`, whether or not it still leads there: a
    /// link on its way that a command could have planted is refused (see
    /// [`link_out_of_a_project`] and [`home_reached_by_a_detour`]).
    pub named_cwd: Option<PathBuf>,
}

/// Everything one `pinfold exec` does, decided before it does any of it.
#[derive(Debug)]
pub struct Plan {
    /// The command as judged: the shell text, or the argv quoted word by word.
    pub text: String,
    pub judgement: Judgement,
    /// A hook token turned the judgement's *ask* into a run.
    pub hook_approved: bool,
    pub step: Step,
}

/// What happens next.
#[derive(Debug)]
pub enum Step {
    /// The verdict is not *allow*, and no hook token approved it: record `record`
    /// (`exec_refused`), say why, run nothing.
    Refuse { record: Value },
    /// `--dry-run`: record `record` (a `check`), show the verdict and `sandbox`, run nothing.
    Show { record: Value, argv: Vec<String>, sandbox: Box<Sandbox> },
    /// Run it: [`crate::run`].
    Run(Box<Run>),
}

impl Step {
    /// The ledger record this step starts with: its kind and payload.
    pub fn record(&self) -> (&'static str, &Value) {
        match self {
            Step::Refuse { record } => ("exec_refused", record),
            Step::Show { record, .. } => ("check", record),
            Step::Run(r) => ("exec_start", &r.record),
        }
    }
}

/// The sandbox a command runs in.
#[derive(Debug)]
pub struct Sandbox {
    /// The preset, merged strictest-wins when several apply.
    pub preset: SandboxPreset,
    /// What the kernel is asked to enforce: writable roots, every protected and hidden path,
    /// the network, the environment.
    pub policy: SandboxPolicy,
    /// The repository's history, kept through the run.
    pub guard: GitGuard,
    /// The control files kept read-only, and those watched (crate::control).
    pub control: control::Guard,
    /// Where the run's changes to the project are kept for `pinfold undo`: the project is a
    /// git repository the sandbox may write. `None`: no undo for this run.
    pub undo: Option<pinfold_undo::Store>,
    /// Undo stores the run holds busy without keeping a record in them, so that an undo does
    /// not put files back under a command writing them (the run waits for an undo under way
    /// to end): the project's own when the backend keeps no record of changes (gVisor, a
    /// container), and every other store whose tree overlaps a writable root (a repository
    /// nested in the project, or the one around it).
    pub busy: Vec<pinfold_undo::Store>,
}

/// A command to run, and all it needs.
#[derive(Debug)]
pub struct Run {
    pub text: String,
    pub argv: Vec<String>,
    /// The `exec_start` record.
    pub record: Value,
    pub sandbox: Sandbox,
    /// The policy files the command was judged by.
    pub loaded: Vec<PathBuf>,
    pub audit: Audit,
    /// The credentials the egress proxy injects, when the network goes through it
    /// ([`Network::Proxy`]); `None` otherwise.
    pub credentials: Option<BTreeMap<String, Credential>>,
}

/// Why there is no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("no sandbox preset named `{name}`")]
    UnknownPreset { name: String, known: Vec<String> },
    #[error("the policy names no sandbox preset for this command")]
    NoPreset,
    #[error("the preset names the backend `{name}`, which this build of pinfold does not have")]
    UnknownBackend { name: String },
    /// The policy was loaded for another directory than the one the command runs in: its
    /// project root, which the sandbox makes writable, is not the working directory or above
    /// it.
    #[error("the project root {} is not the working directory {} or above it", root.display(), cwd.display())]
    ElsewhereRoot { root: PathBuf, cwd: PathBuf },
    /// The working directory was reached through a link inside a project that leads out of
    /// it: a command that could write the project could have planted it, to have the next
    /// run's project (made writable) be the home directory or another repository.
    #[error("the working directory {} is reached through {}, a link inside the project {} that leads out of it (to {})", named.display(), link.display(), project.display(), target.display())]
    PlantedLink { named: PathBuf, link: PathBuf, project: PathBuf, target: PathBuf },
    /// The working directory is the home directory (or above it), which as the project is made
    /// writable, but the caller named another path: reached through a link (`ln -s ~ sub`, then
    /// `cd sub`), or through one since put back (`$PWD` names a real directory again).
    #[error("the working directory is {}, the home directory or above it, but it was named {}: {why}", cwd.display(), named.display())]
    HomeByDetour { cwd: PathBuf, named: PathBuf, why: String },
    /// A writable root reached through a link to the home directory, a directory above it, or
    /// a system directory: a command that could write where the link is could have made it.
    #[error("the writable root {} leads through a link to {}", root.display(), target.display())]
    RootToHome { root: PathBuf, target: PathBuf },
    /// A directory of the project was not, as the run was set up, the directory its path
    /// names: a link stood on its way, swapped in by a command beside this one perhaps.
    #[error("{} leads through a link now, which it did not when the policy was loaded (did a command beside this one swap a directory for a link?)", path.display())]
    Swapped { path: PathBuf },
    /// The project root, which the preset makes writable, is `/` or a system directory (an
    /// agent started in `/etc`): every command would write the system's files.
    #[error("the project root {} is a system directory, which the sandbox would make writable", root.display())]
    SystemProject { root: PathBuf },
}

impl PlanError {
    /// What the user can do about it.
    pub fn hint(&self) -> String {
        match self {
            PlanError::UnknownPreset { known, .. } => format!("the policy defines: {}", known.join(", ")),
            PlanError::NoPreset => "set `defaults.sandbox`, or pass --sandbox PRESET".to_string(),
            PlanError::UnknownBackend { .. } => format!("use one of: {}", pinfold_policy::config::BACKENDS.join(", ")),
            PlanError::ElsewhereRoot { .. } => "load the policy from the directory the command runs in (was a directory on its way swapped for a link?)".to_string(),
            PlanError::PlantedLink { target, .. } => format!("if the link is meant, run from where it leads ({}), named as it is", target.display()),
            PlanError::Swapped { .. } => "run it again; nothing ran".to_string(),
            PlanError::HomeByDetour { cwd, .. } => format!("to work in the home directory, run from it named as it is ({})", cwd.display()),
            PlanError::RootToHome { root, .. } => format!("remove the link at {} (a command may have made it), or name the real path in the policy", root.display()),
            PlanError::SystemProject { .. } => "run pinfold in a project directory (with its own `.git` or policy file); a read-only preset (`--sandbox readonly`) may look here".to_string(),
        }
    }
}

impl From<PlanError> for crate::Error {
    fn from(e: PlanError) -> crate::Error {
        // A link or a swap found on the way: the sandbox could not be set up as the policy
        // means it, and nothing ran (125 from `pinfold exec`), as when the sandbox finds one.
        let setup = matches!(
            e,
            PlanError::ElsewhereRoot { .. } | PlanError::PlantedLink { .. } | PlanError::HomeByDetour { .. } | PlanError::RootToHome { .. } | PlanError::Swapped { .. } | PlanError::SystemProject { .. }
        );
        let err = crate::Error::new(e.to_string()).hint(e.hint());
        if setup { err.kind(crate::Kind::Setup) } else { err }
    }
}

/// The first link on the way to `named` (an absolute path as the caller named it) that lies
/// inside a project (a directory at or above it holding `.git` or a `pinfold.*` file) and
/// leads out of that project: with where it is, the project, and where it leads. Such a link
/// is what a sandboxed command could plant (`ln -s ~ sub`; found: the next run in `sub` had
/// the home directory as its project, and wrote another repository's hooks there). A link
/// outside any project (`/home` to `/var/home`, `~/src` to `/data/src`) or within its own
/// project is taken as the caller's.
pub fn link_out_of_a_project(named: &Path) -> Option<(PathBuf, PathBuf, PathBuf)> {
    let project_of = |dir: &Path| -> Option<PathBuf> {
        dir.ancestors()
            .find(|d| d.join(".git").exists() || ["toml", "yaml", "yml", "json"].iter().any(|e| d.join(format!("pinfold.{e}")).is_file()))
            .map(Path::to_path_buf)
    };
    links_on_the_way(named).into_iter().find_map(|(link, parent, target)| {
        let project = project_of(&parent)?;
        (!target.starts_with(&project)).then_some((link, project, target))
    })
}

/// Each link on the way to `named` (absolute), in order: where it is, the real directory
/// holding it, and where it leads (the walk goes on from there). It stops at a link that
/// leads nowhere.
pub fn links_on_the_way(named: &Path) -> Vec<(PathBuf, PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let mut at = PathBuf::from("/");
    for comp in named.components().skip(1) {
        let next = at.join(comp);
        if std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink()) {
            let parent = std::fs::canonicalize(&at).unwrap_or_else(|_| at.clone());
            let Ok(target) = std::fs::canonicalize(&next) else { break };
            out.push((next, parent, target.clone()));
            at = target;
        } else {
            at = next;
        }
    }
    out
}

/// Why a run in `cwd`, the home directory or a directory above it (`/`), named `named` by
/// its caller, did not get there as the caller meant: `named` leads elsewhere now (a link the
/// shell went through was put back), through a link lying in the home directory, or through a
/// link to the home directory itself or `/`. `None` when `cwd` is not the home directory or
/// above it, or the path leads there honestly (`/home` a link to `/var/home`).
pub fn home_reached_by_a_detour(named: &Path, cwd: &Path, home: Option<&Path>) -> Option<String> {
    let home = home.map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.to_path_buf()))?;
    if !home.starts_with(cwd) {
        return None;
    }
    if std::fs::canonicalize(named).ok().as_deref() != Some(cwd) {
        return Some(format!("{} leads elsewhere now (the way the shell came was changed since)", named.display()));
    }
    links_on_the_way(named).into_iter().find_map(|(link, real_parent, target)| {
        if real_parent.starts_with(&home) {
            return Some(format!("through {}, a link in the home directory", link.display()));
        }
        // To the home directory, `/`, or (but from the top level, as `/home` to `/var/home`
        // is) a directory above the home directory.
        (target == home || target == Path::new("/") || (home.starts_with(&target) && real_parent != Path::new("/")))
            .then(|| format!("through {}, a link to {}", link.display(), target.display()))
    })
}

/// A writable root (as the policy names it) that leads through a link to the home directory,
/// a directory above it, or a system directory: with where it leads.
/// `home` is the home directory's real path.
fn root_to_home(w: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let target = std::fs::canonicalize(w).ok()?;
    if target == w {
        return None;
    }
    let wide = target == Path::new("/") || home.is_some_and(|h| h.starts_with(&target)) || is_system(&target, home);
    wide.then_some(target)
}

/// Whether `p` (a real path) is `/` or lies in a system directory (and not in the home
/// directory `home`, which may be `/root`).
fn is_system(p: &Path, home: Option<&Path>) -> bool {
    const SYSTEM: [&str; 21] = [
        "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/root", "/proc", "/sys", "/dev", "/run", "/var/lib", "/var/log",
        "/var/spool", "/var/cache", "/var/backups", "/var/mail", "/var/opt",
    ];
    p == Path::new("/") || SYSTEM.iter().any(|d| p.starts_with(d) && !home.is_some_and(|h| p.starts_with(h)))
}

/// The command as judged and the argv that runs it: one argument is shell text, run by bash
/// (sh where there is none), since pinfold judged it as bash reads it; several are an argv,
/// judged as the shell would read them quoted.
pub fn command_argv(command: &[String]) -> (String, Vec<String>) {
    if let [text] = command {
        let shell = if Path::new("/bin/bash").exists() { "/bin/bash" } else { "/bin/sh" };
        (text.clone(), vec![shell.to_string(), "-c".to_string(), text.clone()])
    } else {
        (pinfold_shell::join(command), command.to_vec())
    }
}

/// The verdict on `command` in `cx`, with the text judged and the argv that would run it:
/// the first step of [`plan`], for a caller that needs the verdict before it plans the run
/// (the server answers *deny* and *ask* itself, and hands an allowed command to `pinfold
/// exec`, which plans it).
#[derive(Debug)]
pub struct Judged {
    pub text: String,
    pub argv: Vec<String>,
    pub judgement: Judgement,
}

pub fn judge(command: &[String], cx: &Context, policy: &Policy) -> Judged {
    let cwd = &cx.cwd;
    let (text, mut argv) = command_argv(command);
    let extra = extra_writable(cx);
    let judgement = policy.judge_in_sandbox_on(&text, cwd, &extra, cx.sandbox.as_deref(), cx.backend.map(BackendKind::name));
    if command.len() == 1
        && let Some(direct) = judgement.tree.as_ref().and_then(plain_argv)
    {
        argv = direct;
    }
    Judged { text, argv, judgement }
}

/// Plan running `command` in `cx` under `policy`. Reads the file system (the project's git
/// directory, toolchain caches that exist) and nothing else; starts and writes nothing.
pub fn plan(command: &[String], cx: &Context, policy: &Policy, dirs: &Dirs) -> Result<Plan, PlanError> {
    let cwd = &cx.cwd;
    let Judged { text, argv, mut judgement } = judge(command, cx, policy);
    let mut hook_approved = cx.hook_origin.is_some() && judgement.decision == Action::Ask;
    let mut record = record::judgement(&judgement);
    record["command"] = text.as_str().into();
    record["cwd"] = cwd.display().to_string().into();
    if hook_approved && let Some(t) = &cx.hook_origin {
        record["hook_origin"] = record::token_id(t).into();
    }
    if judgement.decision != Action::Allow && !hook_approved && !cx.dry_run {
        return Ok(Plan { text, judgement, hook_approved, step: Step::Refuse { record } });
    }
    let config = policy.config();
    // The root comes from the directories above the working directory the policy was loaded
    // for, which each door names as the command's, without links: any other root is a policy
    // loaded for elsewhere, and its project would be made writable.
    if !cwd.starts_with(&config.project_root) {
        return Err(PlanError::ElsewhereRoot { root: config.project_root.clone(), cwd: cwd.clone() });
    }
    if let Some(named) = cx.named_cwd.as_deref() {
        if let Some(why) = home_reached_by_a_detour(named, cwd, dirs.home.as_deref()) {
            return Err(PlanError::HomeByDetour { cwd: cwd.clone(), named: named.to_path_buf(), why });
        }
        if std::fs::canonicalize(named).ok().as_deref() == Some(cwd.as_path())
            && let Some((link, project, target)) = link_out_of_a_project(named)
        {
            return Err(PlanError::PlantedLink { named: named.to_path_buf(), link, project, target });
        }
    }
    let preset = preset(&judgement, cx.sandbox.as_deref(), config)?;
    let backend = backend(&preset, cx)?;
    // A backend without undo: judged again as what it is, if the verdict could have counted
    // on undo (a rule's `when`). Never laxer: without undo fewer rules hold.
    if !backend.records_changes() && policy.undo_here() && cx.backend.is_none() {
        let again = policy.judge_in_sandbox_on(&text, cwd, &extra_writable(cx), Some(&preset.name), Some(backend.name()));
        if again.decision > judgement.decision {
            judgement = again;
            hook_approved = hook_approved && judgement.decision == Action::Ask;
            let origin = record.get("hook_origin").cloned().filter(|_| hook_approved);
            record = record::judgement(&judgement);
            record["command"] = text.as_str().into();
            record["cwd"] = cwd.display().to_string().into();
            if let Some(o) = origin {
                record["hook_origin"] = o;
            }
            if judgement.decision != Action::Allow && !hook_approved && !cx.dry_run {
                return Ok(Plan { text, judgement, hook_approved, step: Step::Refuse { record } });
            }
        }
    }
    let (mut sp, guard, control, mut undo) = sandbox_policy(&preset, cx, config, dirs);
    if let Some(path) = control.swapped.clone() {
        return Err(PlanError::Swapped { path });
    }
    let real_home = dirs.home.as_deref().map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.to_path_buf()));
    for w in &sp.writable {
        if let Some(target) = root_to_home(w, real_home.as_deref()) {
            return Err(PlanError::RootToHome { root: w.clone(), target });
        }
    }
    // An agent started in a system directory (found by an outside attack: in `/etc`, the
    // project root, made writable, was `/etc`).
    let project = std::fs::canonicalize(&config.project_root).unwrap_or_else(|_| config.project_root.clone());
    if is_system(&project, real_home.as_deref()) && sp.writable.iter().any(|w| std::fs::canonicalize(w).is_ok_and(|w| w == project)) {
        return Err(PlanError::SystemProject { root: project });
    }
    sp.backend = backend;
    sp.container = pinfold_sandbox::ContainerSettings {
        image: cx.image.clone().or_else(|| preset.container.image.clone()),
        runtime: preset.container.runtime.clone(),
        cpus: preset.container.cpus,
        memory: preset.container.memory,
        pids: preset.container.pids,
        keep: cx.keep_container.clone(),
    };
    let mut busy: Vec<pinfold_undo::Store> = match dirs.state.as_deref() {
        Some(state) if config.undo_enabled => pinfold_undo::Store::overlapping(state, &sp.writable),
        _ => Vec::new(),
    };
    if backend.records_changes() {
        busy.retain(|s| undo.as_ref().is_none_or(|u| u.dir != s.dir));
    } else {
        sp.watch.clear();
        if let Some(u) = undo.take() {
            busy.retain(|s| s.dir != u.dir);
            busy.push(u);
        }
    }
    record["sandbox"] = serde_json::json!({"preset": preset.name, "backend": backend, "network": sp.network, "writable": sp.writable, "undo": undo.is_some()});
    if backend == BackendKind::Container {
        record["sandbox"]["container"] = serde_json::to_value(&sp.container).unwrap_or_default();
        // The ledger's canonical encoding has no floating-point numbers: CPUs as text.
        if let Some(cpus) = sp.container.cpus {
            record["sandbox"]["container"]["cpus"] = cpus.to_string().into();
        }
    }
    if sp.network == Network::Proxy {
        record["sandbox"]["hosts"] = preset.network_hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>().into();
    }
    let sandbox = Sandbox { preset, policy: sp, guard, control, undo, busy };
    if cx.dry_run {
        record["dry_run"] = true.into();
        return Ok(Plan { text, judgement, hook_approved, step: Step::Show { record, argv, sandbox: Box::new(sandbox) } });
    }
    record["argv"] = serde_json::json!(argv);
    let credentials = (sandbox.policy.network == Network::Proxy).then(|| config.credentials.clone());
    let run = Run { text: text.clone(), argv, record, sandbox, loaded: config.files.clone(), audit: config.audit.clone(), credentials };
    Ok(Plan { text, judgement, hook_approved, step: Step::Run(Box::new(run)) })
}

/// The backend: asked for, or the preset's.
fn backend(preset: &SandboxPreset, cx: &Context) -> Result<BackendKind, PlanError> {
    match cx.backend {
        Some(b) => Ok(b),
        None => preset.backend.parse().map_err(|_| PlanError::UnknownBackend { name: preset.backend.clone() }),
    }
}

fn extra_writable(cx: &Context) -> Vec<PathBuf> {
    cx.write.iter().map(|p| cx.cwd.join(p)).collect()
}

/// The preset: asked for, or the one the commands name (merged, strictest wins, when they
/// name several), or the default.
pub fn preset(judgement: &Judgement, asked: Option<&str>, config: &pinfold_policy::config::Config) -> Result<SandboxPreset, PlanError> {
    let names: Vec<String> = match asked {
        // `a+b`: the Strictest-Wins merge of presets a and b (preset names cannot hold `+`);
        // `pinfold hook` writes these for inputs that must run as one.
        Some(s) => s.split('+').map(str::to_string).collect(),
        None => {
            let mut names: Vec<String> = judgement.commands.iter().filter_map(|c| c.sandbox.clone()).collect();
            names.sort();
            names.dedup();
            if names.is_empty() {
                config.defaults.sandbox.clone().into_iter().collect()
            } else {
                names
            }
        }
    };
    let mut presets: Vec<&SandboxPreset> = Vec::new();
    for n in &names {
        match config.sandboxes.get(n) {
            Some(p) => presets.push(p),
            None => return Err(PlanError::UnknownPreset { name: n.clone(), known: config.sandboxes.keys().cloned().collect() }),
        }
    }
    pinfold_policy::merge_presets(&presets).ok_or(PlanError::NoPreset)
}

/// The sandbox for `preset` in `cx`: every writable root, every protected and hidden path,
/// the network and the environment; and the git guard whose protected objects it holds.
fn sandbox_policy(
    preset: &SandboxPreset,
    cx: &Context,
    config: &pinfold_policy::config::Config,
    dirs: &Dirs,
) -> (SandboxPolicy, GitGuard, control::Guard, Option<pinfold_undo::Store>) {
    let cwd = &cx.cwd;
    let mut sp = SandboxPolicy::new(cwd.clone());
    let root = &config.project_root;
    let paths = |v: &[String]| -> Vec<PathBuf> { v.iter().map(PathBuf::from).collect() };
    sp.writable = protect::preset_writable(preset, root, dirs);
    sp.writable.extend(cx.write.iter().map(|p| cwd.join(p)));
    sp.write_deny = paths(&preset.write_deny);
    sp.write_deny.extend(cx.deny_write.iter().map(|p| cwd.join(p)));
    // The repository's history survives the run (see git_guard.rs).
    let git_dir = match pinfold_sandbox::git_equivalents(root, &[root.join(".git")]).pop() {
        Some(common) => common,
        None => root.join(".git"),
    };
    let guard = if sp.writable.iter().any(|w| git_dir.starts_with(w)) || sp.writable.iter().any(|w| w == root) {
        GitGuard::before(&git_dir)
    } else {
        GitGuard::default()
    };
    sp.write_deny.extend(guard.protect.iter().cloned());
    sp.shared.extend(guard.protect.iter().cloned());
    // In a worktree `.git` is a file: protect the hooks and config where they really are.
    let equivalents = pinfold_sandbox::git_equivalents(root, &sp.write_deny);
    sp.write_deny.extend(equivalents);
    // pinfold's own configuration and cache are never writable from inside: whoever writes
    // them changes the verdicts.
    sp.write_deny.extend(config.files.iter().cloned());
    // Nor can a command create one where discovery would find it: every name a project policy
    // file may have (`pinfold.*` and `pinfold.local.*`, each extension), in the project root
    // and in each directory from there down to the working directory. A policy file made from
    // inside would decide the verdicts of the commands that follow.
    sp.write_deny.extend(protect::policy_file_paths(root, cwd));
    sp.write_deny.extend(dirs.config.iter().cloned());
    sp.write_deny.extend(dirs.cache.iter().cloned());
    // Files that programs outside the sandbox run or obey later: read-only when they exist,
    // moved aside after the run when it creates them (control.rs).
    let control = control::Guard::before(root, cwd, dirs.home.as_deref(), dirs.xdg_config_home.as_deref(), &sp.writable, &config.control_lift);
    sp.write_deny.extend(control.protect.iter().cloned());
    // Undo: every change the command makes beneath the project is reported before it
    // happens and what it replaces kept (pinfold-undo), when the project is a git repository
    // the sandbox may write. The records are in pinfold's state directory, hidden and
    // read-only in every sandbox (below): a command that could change them could change what
    // an undo puts back.
    let undo = if config.undo_enabled && sp.writable.iter().any(|w| root.starts_with(w)) {
        pinfold_undo::Store::locate(root, dirs.state.as_deref()).ok()
    } else {
        None
    };
    if undo.is_some() {
        sp.watch.push(root.clone());
    }
    sp.read_deny = paths(&preset.read_deny);
    sp.read_deny.extend(cx.deny_read.iter().map(|p| cwd.join(p)));
    sp.read_deny.extend(protect::engine_sockets(dirs));
    sp.read_deny.extend(protect::agent_sockets(dirs));
    // The hook's key: a command that could read it could approve its own asks.
    if let Some(key_dir) = dirs.hook_key_dir() {
        sp.read_deny.push(key_dir.to_path_buf());
        sp.write_deny.push(key_dir.to_path_buf());
        sp.own.push(key_dir.to_path_buf());
    }
    // The audit ledger and its signing key: a command that could write them could rewrite
    // what it did; one that could read the key could sign a forged history.
    for p in dirs.state.iter().chain(&dirs.ledger_key) {
        sp.own.push(p.clone());
        if !sp.read_deny.iter().any(|d| p.starts_with(d)) {
            sp.read_deny.push(p.clone());
            sp.write_deny.push(p.clone());
        }
    }
    sp.network = match cx.net {
        Some(Net::On) => Network::On,
        Some(Net::Off) => Network::Off,
        // A host allowlist: the network only through the egress proxy (docs/egress.md).
        None if preset.has_allowlist() => Network::Proxy,
        None if preset.network_allow => Network::On,
        None => Network::Off,
    };
    if sp.network == Network::Proxy {
        // Where the proxy listens inside; the run adds the CA bundle of credential endpoints
        // and removes the secrets' variables and files once the proxy has read them.
        sp.set_env.extend(crate::egress::proxy_env(sp.proxy_port, cx.java_tool_options.as_deref()));
    }
    sp.keep_env = preset.env_keep.clone();
    sp.keep_env.extend(cx.keep_env.iter().cloned());
    sp.allow_degraded = cx.allow_degraded;
    (sp, guard, control, undo)
}

/// Shell builtins and keywords: text naming one of these needs the shell. `true` and `false`
/// are not listed: the programs behave exactly as the builtins.
const SHELL_BUILTINS: &[&str] = &[
    ".", ":", "[", "alias", "bg", "break", "cd", "chdir", "command", "continue", "echo", "eval", "exec", "exit",
    "export", "fc", "fg", "getopts", "hash", "jobs", "kill", "local", "printf", "pwd", "read", "readonly",
    "return", "set", "shift", "source", "test", "times", "trap", "type", "ulimit", "umask", "unalias", "unset",
    "wait", "time", "coproc", "function", "select", "let", "declare", "typeset",
];

/// When shell text is a single plain command (`cargo test -p x`: no expansions, quotes
/// aside, no redirects, assignments, operators or builtins), its argv: running it directly is
/// what `sh -c` would do, one process sooner.
pub fn plain_argv(tree: &pinfold_shell::CommandTree) -> Option<Vec<String>> {
    let [c] = tree.commands.as_slice() else { return None };
    let simple = c.kind == pinfold_shell::CommandKind::Simple
        && c.redirects.is_empty()
        && c.assignments.is_empty()
        && c.context.is_empty()
        && c.wrappers.is_empty()
        && c.unresolved.is_none()
        && c.words.iter().all(|w| !w.dynamic && !w.glob && !w.tilde);
    let name = c.words.first()?;
    (simple && !SHELL_BUILTINS.contains(&name.text.as_str()) && !tree.source.contains(['\n', ';', '&', '|', '`', '$', '<', '>', '(', ')', '{', '}', '*', '?', '[', '~', '#', '=']))
        .then(|| c.argv())
}
