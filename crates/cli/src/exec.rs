//! `pinfold exec` and `pinfold doctor`: judge, then run confined; report what the kernel can
//! enforce.

use std::path::{Path, PathBuf};

use clap::Args;
use pinfold_policy::config::{Action, SandboxPreset};
use pinfold_sandbox::{Network, Policy as SandboxPolicy, SandboxError};

use crate::anyhow_lite::Error;
use crate::exit;

#[path = "egress.rs"]
mod egress;

#[derive(Debug, Args, PartialEq, Default)]
pub struct ExecArgs {
    /// Use only this policy file (plus what it extends).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Run under this sandbox preset instead of the one the policy picks.
    #[arg(long, value_name = "PRESET")]
    pub(crate) sandbox: Option<String>,
    /// Also let the command write PATH (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    pub(crate) write: Vec<PathBuf>,
    /// Keep PATH read-only even inside a writable root (repeatable).
    #[arg(long = "deny-write", value_name = "PATH")]
    pub(crate) deny_write: Vec<PathBuf>,
    /// Hide PATH from the command (repeatable).
    #[arg(long = "deny-read", value_name = "PATH")]
    pub(crate) deny_read: Vec<PathBuf>,
    /// Network access, overriding the preset.
    #[arg(long, value_name = "off|on", value_parser = ["off", "on"])]
    pub(crate) net: Option<String>,
    /// Run in DIR (also where the project policy is found).
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Pass environment variable VAR through even if it looks like a secret (repeatable).
    #[arg(long = "keep-env", value_name = "VAR")]
    pub(crate) keep_env: Vec<String>,
    /// Write what the sandbox enforced, as JSON, to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Print the verdict and the resolved sandbox, and run nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Run even when the kernel lacks a layer; the report lists the guarantees that are gone.
    #[arg(long)]
    pub(crate) allow_degraded: bool,
    /// The command: one argument is shell text, run by `bash -c` (sh without bash); several
    /// are an argv.
    #[arg(value_name = "COMMAND", trailing_var_arg = true, required = true)]
    pub(crate) command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

/// Container-engine sockets: hidden by default, since reaching one is root on the host.
fn engine_sockets() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = ["/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/run/containerd/containerd.sock", "/var/run/crio/crio.sock"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR") {
        let rt = PathBuf::from(rt);
        v.push(rt.join("docker.sock"));
        v.push(rt.join("podman/podman.sock"));
        v.push(rt.join("containerd/containerd.sock"));
    }
    if let Some(h) = env_path("HOME") {
        // Docker Desktop, Colima, Rancher Desktop, OrbStack keep theirs in the home directory.
        for s in [".docker/run/docker.sock", ".docker/desktop/docker.sock", ".colima/*/docker.sock", ".rd/docker.sock", ".orbstack/run/docker.sock"] {
            v.push(h.join(s));
        }
    }
    v
}

fn env_path(k: &str) -> Option<PathBuf> {
    std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from)
}

pub fn run(args: ExecArgs) -> Result<i32, Error> {
    // Start the sandbox's namespaces and base mount tree now, so the kernel builds them while
    // the policy is loaded and the command judged; dropped (killed) if nothing runs.
    let pre = if args.dry_run { None } else { pinfold_sandbox::Prestart::begin() };
    let cwd = match &args.cwd {
        Some(d) => crate::absolute(d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let policy = crate::load_policy(args.config.as_deref(), Some(&cwd), true)?;
    // One argument is shell text run by `sh -c`; several are an argv, judged as the shell
    // would read them quoted.
    let (text, mut argv) = if args.command.len() == 1 {
        // pinfold judged the text as bash reads it, so bash runs it (sh where there is none).
        let shell = if Path::new("/bin/bash").exists() { "/bin/bash" } else { "/bin/sh" };
        (args.command[0].clone(), vec![shell.to_string(), "-c".to_string(), args.command[0].clone()])
    } else {
        (pinfold_shell::join(&args.command), args.command.clone())
    };
    let extra: Vec<PathBuf> = args.write.iter().map(|p| cwd.join(p)).collect();
    let judgement = policy.judge_with_writable(&text, &cwd, &extra);
    if args.command.len() == 1 {
        if let Some(direct) = judgement.tree.as_ref().and_then(plain_argv) {
            argv = direct;
        }
    }
    // --- hook tokens (crates/cli/src/hook/token.rs, docs/hooks.md) ---
    // `pinfold hook` rewrites each sub-command as `PINFOLD_HOOK_ORIGIN=<token> pinfold exec
    // --sandbox P -- 'TEXT'`. A valid token for exactly this text, preset and cwd, with no
    // option that widens the sandbox, means a person approved it in the agent: an ASK runs, in
    // that sandbox. Never a DENY; invalid tokens are ignored with a warning.
    let hook_approved = crate::hook::token::exec_accepts(
        &args.command,
        args.sandbox.as_deref(),
        &cwd,
        judgement.decision,
        args.config.is_none() && args.write.is_empty() && args.net.is_none() && args.keep_env.is_empty() && !args.allow_degraded,
    );
    // --- end hook tokens ---
    // A run that cannot be recorded does not happen: 125, nothing ran (record.rs).
    let not_recorded = |e: Error| {
        crate::report(&e);
        Ok(exit::EXEC_SETUP)
    };
    let recorder = match crate::record::Recorder::open(&policy.config().audit) {
        Ok(r) => r,
        Err(e) => return not_recorded(e),
    };
    let mut record = crate::record::judgement(&judgement);
    record["command"] = text.as_str().into();
    record["cwd"] = cwd.display().to_string().into();
    if hook_approved && let Ok(t) = std::env::var(crate::hook::token::ENV) {
        record["hook_origin"] = crate::record::token_id(&t).into();
    }
    if judgement.decision != Action::Allow && !hook_approved && !args.dry_run {
        if let Err(e) = recorder.record("exec_refused", record) {
            return not_recorded(e);
        }
        let what = if judgement.decision == Action::Deny { "denied" } else { "needs a person's confirmation, and exec cannot ask" };
        say!("pinfold: {what}: {}", judgement.reason);
        if let Some(c) = judgement.commands.iter().find(|c| c.decision == judgement.decision) {
            if let Some(m) = &c.message {
                say!("  message: {m}");
            }
            if let Some(f) = &c.fix {
                say!("  fix: {f}");
            }
        }
        return Ok(exit::EXEC_DENIED);
    }
    let config = policy.config();
    // The preset: asked for, or the one the commands name (merged, strictest wins, when they
    // name several), or the default.
    let preset_names: Vec<String> = match &args.sandbox {
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
    for n in &preset_names {
        match config.sandboxes.get(n) {
            Some(p) => presets.push(p),
            None => {
                let known: Vec<&str> = config.sandboxes.keys().map(String::as_str).collect();
                return Err(Error::new(format!("no sandbox preset named `{n}`")).hint(format!("the policy defines: {}", known.join(", "))));
            }
        }
    }
    let Some(preset) = pinfold_policy::merge_presets(&presets) else {
        return Err(Error::new("the policy names no sandbox preset for this command").hint("set `defaults.sandbox`, or pass --sandbox PRESET"));
    };
    let home = env_path("HOME");
    let mut sp = SandboxPolicy::new(cwd.clone());
    let root = &config.project_root;
    let paths = |v: &[String]| -> Vec<PathBuf> { v.iter().map(PathBuf::from).collect() };
    sp.writable = paths(&preset.write_allow);
    if preset.write_allow.iter().any(|w| Path::new(w) == root.as_path()) {
        // A preset that may write the project also gets its git directory (worktrees) and the
        // toolchain caches that exist.
        sp.writable = pinfold_sandbox::default_writable(root, None, home.as_deref(), &sp.writable);
    }
    sp.writable.extend(args.write.iter().map(|p| cwd.join(p)));
    sp.write_deny = paths(&preset.write_deny);
    sp.write_deny.extend(args.deny_write.iter().map(|p| cwd.join(p)));
    // The repository's history survives the run (see git_guard.rs).
    let git_dir = match pinfold_sandbox::git_equivalents(root, &[root.join(".git")]).pop() {
        Some(common) => common,
        None => root.join(".git"),
    };
    let guard = if sp.writable.iter().any(|w| git_dir.starts_with(w)) || sp.writable.iter().any(|w| w == root) {
        crate::git_guard::GitGuard::before(&git_dir)
    } else {
        crate::git_guard::GitGuard::default()
    };
    sp.write_deny.extend(guard.protect.iter().cloned());
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
    for dir in policy_dirs(root, &cwd) {
        for stem in ["pinfold", "pinfold.local"] {
            for ext in ["toml", "yaml", "yml", "json"] {
                sp.write_deny.push(dir.join(format!("{stem}.{ext}")));
            }
        }
    }
    if let Some(x) = env_path("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config"))) {
        sp.write_deny.push(x.join("pinfold"));
    }
    if let Some(c) = crate::cache_dir() {
        sp.write_deny.push(c);
    }
    sp.read_deny = paths(&preset.read_deny);
    sp.read_deny.extend(args.deny_read.iter().map(|p| cwd.join(p)));
    sp.read_deny.extend(engine_sockets());
    // The hook's key: a command that could read it could approve its own asks.
    if let Some(key_dir) = crate::hook::token::key_path().and_then(|k| k.parent().map(Path::to_path_buf)) {
        sp.read_deny.push(key_dir.clone());
        sp.write_deny.push(key_dir);
    }
    // The audit ledger and its signing key: a command that could write them could rewrite
    // what it did; one that could read the key could sign a forged history.
    let ledger_dir = pinfold_ledger::state_dir().ok();
    let ledger_key = ledger_dir.as_deref().map(|d| pinfold_ledger::Paths::new(d).key);
    for p in ledger_dir.into_iter().chain(ledger_key) {
        if !sp.read_deny.iter().any(|d| p.starts_with(d)) {
            sp.read_deny.push(p.clone());
            sp.write_deny.push(p);
        }
    }
    sp.network = match args.net.as_deref() {
        Some("on") => Network::On,
        Some(_) => Network::Off,
        // A host allowlist: the network only through the egress proxy (docs/egress.md).
        None if preset.has_allowlist() => Network::Proxy,
        None if preset.network_allow => Network::On,
        None => Network::Off,
    };
    // The egress proxy, when the network goes through it: started (and its secrets read)
    // before the run, serving the listener the sandbox makes inside its namespace as soon as
    // it arrives.
    let egress = if sp.network == Network::Proxy && !args.dry_run {
        let started = crate::record::Recorder::open(&config.audit).and_then(|r| egress::Egress::start(&preset, &config.credentials, r));
        match started {
            Ok(e) => Some(e),
            Err(e) => return not_recorded(e),
        }
    } else {
        None
    };
    if sp.network == Network::Proxy {
        let java = std::env::var("JAVA_TOOL_OPTIONS").ok();
        match &egress {
            Some(e) => {
                sp.set_env.extend(e.sandbox_env(sp.proxy_port, java.as_deref()));
                // The secrets never reach the command: not their variables, not their files.
                sp.remove_env.extend(e.secret_vars.iter().cloned());
                sp.read_deny.extend(e.secret_files.iter().cloned());
            }
            None => sp.set_env.extend(egress::proxy_env(sp.proxy_port, java.as_deref())),
        }
    }
    sp.keep_env = preset.env_keep.clone();
    sp.keep_env.extend(args.keep_env.iter().cloned());
    sp.allow_degraded = args.allow_degraded;

    record["sandbox"] = serde_json::json!({"preset": preset.name, "network": sp.network, "writable": sp.writable});
    if sp.network == Network::Proxy {
        record["sandbox"]["hosts"] = preset.network_hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>().into();
    }
    if args.dry_run {
        record["dry_run"] = true.into();
        if let Err(e) = recorder.record("check", record) {
            return not_recorded(e);
        }
        let plan = sp.plan().map_err(sandbox_error)?;
        let out = serde_json::json!({
            "decision": judgement.decision,
            "reason": judgement.reason,
            "sandbox": preset.name,
            "argv": argv,
            "cwd": cwd,
            "plan": plan,
            "keep_env": sp.keep_env,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON values serialise"));
        return Ok(exit::OK);
    }
    record["argv"] = serde_json::json!(argv);

    // Recorded before anything runs: a run that cannot be recorded does not happen. The
    // append (with its fdatasync) runs on its own thread while the sandbox is resolved, and
    // the sandbox waits for it before it takes the command (`release`).
    let started = std::time::Instant::now();
    // The writable roots are recorded as open to a sandboxed command before it starts, so that
    // policy files it could plant there are not read later without a person's say (trust.rs).
    let roots = sp.writable.clone();
    let loaded = config.files.clone();
    let mut pending = Some(std::thread::spawn(move || {
        let r = recorder.record("exec_start", record);
        let r = r.and_then(|seq| crate::trust::begin_run(&roots, &loaded).map(|span| (seq, span)));
        (recorder, r)
    }));
    type Started = (crate::record::Recorder, Result<(Option<u64>, crate::trust::RunSpan), Error>);
    let join = |h: std::thread::JoinHandle<Started>| h.join().expect("the recording thread does not panic");
    let mut start: Option<Started> = None;
    let result = sp.run_proxied(
        &argv,
        pre,
        &mut || {
            let s = start.insert(join(pending.take().expect("released once")));
            s.1.as_ref().map(drop).map_err(Error::one_line)
        },
        &mut |listener| {
            if let Some(e) = &egress {
                e.serve(listener);
            }
        },
    );
    // Every connection ends with the run; each decision is in the ledger before exec_end.
    let egress_recorded = egress.map(egress::Egress::finish);
    if let Some(h) = pending.take() {
        start = Some(join(h));
    }
    let Some((recorder, started_rec)) = start else { unreachable!("joined in release or above") };
    let (start_seq, span) = match started_rec {
        Ok((seq, span)) => (Ok(seq), Some(span)),
        Err(e) => (Err(e), None),
    };
    // The command and everything it started have ended: close the roots' span.
    // Failing that, the span stays open until a later pinfold finds this process gone and
    // closes it then: later than it should, so stricter, never laxer.
    if let Some(Err(e)) = span.map(crate::trust::RunSpan::end) {
        crate::report(&e);
    }
    let start_seq = match (start_seq, egress_recorded) {
        (Ok(_), Some(Err(e))) => Err(e),
        (s, _) => s,
    };
    let start_seq = match start_seq {
        Ok(s) => s,
        Err(e) => {
            if let Ok(o) = result {
                o.leave_unreaped();
            }
            return not_recorded(e);
        }
    };
    let mut end = serde_json::json!({
        "command": text,
        "start_seq": start_seq,
        "duration_us": started.elapsed().as_micros() as u64,
    });
    match &result {
        Ok(o) => {
            end["exit"] = o.code.into();
            end["sandbox"] = report_summary(&o.report);
        }
        Err(e) => {
            end["exit"] = exit::EXEC_SETUP.into();
            end["error"] = e.to_string().into();
        }
    }
    let end_recorded = recorder.record("exec_end", end);
    for p in guard.after() {
        say!("pinfold: restored {}, which the command deleted", p.display());
    }
    if guard.unprotected > 0 {
        say!(
            "pinfold: {} loose git objects were not protected during the run (over {}); `git gc` packs them",
            guard.unprotected,
            crate::git_guard::MAX_LOOSE
        );
    }
    if let Err(e) = end_recorded {
        // The command ran, but its end is not in the ledger: say so, and do not pass its
        // status on as if all were well.
        crate::report(&e);
        if let Ok(o) = result {
            o.leave_unreaped();
        }
        return Ok(exit::EXEC_SETUP);
    }
    match result {
        Ok(outcome) => {
            // pinfold exits right after: the sandbox's last process need not be waited for.
            outcome.leave_unreaped();
            if let Some(f) = &args.report {
                let json = serde_json::to_string_pretty(&outcome.report).expect("the report serialises");
                std::fs::write(f, json + "\n").map_err(|e| Error::new(format!("cannot write the report to {}", f.display())).cause(e))?;
            }
            Ok(outcome.code)
        }
        Err(e) => {
            let err = sandbox_error(e);
            crate::report(&err);
            Ok(exit::EXEC_SETUP)
        }
    }
}

/// The directories where a project policy file would be found for a command run in `cwd`:
/// the project root and each directory below it down to `cwd` (just the root when `cwd` is
/// not inside it).
fn policy_dirs(root: &Path, cwd: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(rest) = cwd.strip_prefix(root) {
        let mut d = root.to_path_buf();
        for c in rest.components() {
            d.push(c);
            dirs.push(d.clone());
        }
    }
    dirs
}

/// The SandboxReport as recorded at the end of a run: the layers and what they granted, with
/// long path lists cut to their counts.
fn report_summary(r: &pinfold_sandbox::SandboxReport) -> serde_json::Value {
    serde_json::json!({
        "writable": r.writable,
        "missing_writable": r.missing_writable,
        "write_deny": r.write_deny.len(),
        "read_deny": r.read_deny.len(),
        "placeholders": r.placeholders.len(),
        "network": r.network,
        "namespaces": r.namespaces,
        "landlock": r.landlock,
        "seccomp": r.seccomp.len(),
        "hygiene": r.hygiene,
        "env_removed": r.env_removed,
        "degraded": r.degraded,
    })
}

fn sandbox_error(e: SandboxError) -> Error {
    let hint = e.hint().map(str::to_string);
    let mut err = Error::new(format!("sandbox: {e}"));
    if let Some(h) = hint {
        err = err.hint(h);
    }
    err
}

pub fn doctor(args: DoctorArgs) -> Result<i32, Error> {
    let a = pinfold_sandbox::probe();
    let problems = a.problems();
    let cwd = std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?;
    let hooks = crate::hook::init::doctor_rows(&cwd);
    let hooks_ok = !hooks.iter().any(|h| h.problem);
    if args.json {
        let out = serde_json::json!({
            "supported": a.supported(),
            "availability": a,
            "problems": problems.iter().map(|(layer, why, fix)| serde_json::json!({"layer": layer, "why": why, "fix": fix})).collect::<Vec<_>>(),
            "hooks": hooks,
            "hooks_ok": hooks_ok,
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON values serialise"));
    } else {
        println!("Landlock ABI:       {}{}", a.landlock_abi, if a.landlock_abi >= 6 { " (file system, TCP, scoping)" } else if a.landlock_abi >= 4 { " (file system, TCP)" } else if a.landlock_abi >= 1 { " (file system)" } else { " (none)" });
        println!("user namespaces:    {}", if a.user_namespaces { "yes".to_string() } else { format!("no: {}", a.user_namespaces_why.clone().unwrap_or_default()) });
        println!("network namespaces: {}", if a.network_namespaces { "yes" } else { "no" });
        println!("seccomp filters:    {}", if a.seccomp { "yes" } else { "no" });
        if problems.is_empty() {
            println!("\npinfold can enforce every layer here.");
        } else {
            println!();
            for (layer, why, fix) in &problems {
                println!("missing: {layer}: {why}\n  fix: {fix}");
            }
        }
        println!("\nagent hooks:");
        for h in &hooks {
            let state = if h.problem { h.state.to_uppercase() } else { h.state.to_string() };
            let at = match (&h.file, &h.event) {
                (Some(f), Some(e)) => format!("{} ({e}): ", f.display()),
                _ => String::new(),
            };
            println!("  {:<12} {:<8} {state}: {at}{}", h.agent, h.scope, h.detail);
            if let Some(fix) = &h.fix {
                println!("  {:<12} {:<8} fix: {fix}", "", "");
            }
        }
        if hooks_ok {
            println!("\nevery installed hook guards its agent and fails closed.");
        } else {
            let bad: Vec<String> = hooks.iter().filter(|h| h.problem).map(|h| format!("{} ({})", h.agent, h.scope)).collect();
            println!("\nnot guarded as they should be: {}", bad.join(", "));
        }
    }
    Ok(if a.supported() && hooks_ok { exit::OK } else { exit::TEST_FAILED })
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
fn plain_argv(tree: &pinfold_shell::CommandTree) -> Option<Vec<String>> {
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
