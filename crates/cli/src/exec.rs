//! `pinfold exec` and `pinfold doctor`: judge, then run confined; report what the kernel can
//! enforce.

use std::path::{Path, PathBuf};

use clap::Args;
use pinfold_plan::record::Recorder;
use pinfold_plan::{Context, Dirs, Finished, Net, Step};
use pinfold_policy::config::Action;

use pinfold_plan::Error;
use crate::{errors, exit};

#[derive(Debug, Args, PartialEq, Default)]
pub struct ExecArgs {
    /// Use only this policy file (plus what it extends).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Run under this sandbox preset instead of the one the policy picks.
    #[arg(long, value_name = "PRESET")]
    pub(crate) sandbox: Option<String>,
    /// Run on this backend instead of the preset's: process (namespaces, Landlock and
    /// seccomp on the host kernel), gvisor (gVisor's runsc) or container (Docker or Podman,
    /// in the preset's `image` or --image). See docs/backends.md.
    #[arg(long, value_name = "BACKEND", value_parser = clap::builder::PossibleValuesParser::new(["process", "gvisor", "container"]))]
    pub(crate) backend: Option<String>,
    /// With the container backend: run in this image instead of the preset's `image`.
    #[arg(long, value_name = "IMAGE")]
    pub(crate) image: Option<String>,
    /// With the container backend: run in the container kept between runs under this name
    /// (`pinfold serve` passes it for each sandbox; docs/backends.md).
    #[arg(long, value_name = "NAME", hide = true)]
    pub(crate) keep_container: Option<String>,
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

pub fn run(args: ExecArgs, dirs: &Dirs) -> Result<i32, Error> {
    // Start the sandbox's namespaces and base mount tree now, so the kernel builds them while
    // the policy is loaded and the command judged; dropped (killed) if nothing runs.
    let pre = if args.dry_run { None } else { pinfold_sandbox::Prestart::begin() };
    let cwd = match &args.cwd {
        Some(d) => crate::absolute(d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let named_cwd = crate::named_cwd(args.cwd.as_deref(), &cwd);
    let policy = crate::load_policy(args.config.as_deref(), Some(&cwd), true, dirs)?;
    // --- hook tokens (crates/cli/src/hook/token.rs, docs/hooks.md) ---
    // `pinfold hook` rewrites each sub-command as `PINFOLD_HOOK_ORIGIN=<token> pinfold exec
    // --sandbox P -- 'TEXT'`. A valid token for exactly this text, preset and cwd, with no
    // option that widens the sandbox, means a person approved it in the agent: an ASK runs, in
    // that sandbox. Never a DENY; invalid tokens are ignored with a warning.
    let hook_origin = crate::hook::token::exec_token(
        &args.command,
        args.sandbox.as_deref(),
        &cwd,
        args.config.is_none() && args.write.is_empty() && args.net.is_none() && args.keep_env.is_empty() && !args.allow_degraded,
        dirs,
    );
    // --- end hook tokens ---
    // A run that cannot be recorded does not happen: 125, nothing ran (pinfold_plan::record,
    // crate::errors).
    let recorder = Recorder::open(&policy.config().audit, dirs)?;
    let cx = Context {
        cwd,
        sandbox: args.sandbox.clone(),
        write: args.write.clone(),
        deny_write: args.deny_write.clone(),
        deny_read: args.deny_read.clone(),
        net: args.net.as_deref().map(|n| if n == "on" { Net::On } else { Net::Off }),
        keep_env: args.keep_env.clone(),
        allow_degraded: args.allow_degraded,
        dry_run: args.dry_run,
        hook_origin,
        java_tool_options: std::env::var("JAVA_TOOL_OPTIONS").ok(),
        backend: args.backend.as_deref().map(|b| b.parse().expect("clap allows only known backends")),
        image: args.image.clone(),
        keep_container: args.keep_container.clone(),
        named_cwd,
    };
    let plan = pinfold_plan::plan(&args.command, &cx, &policy, dirs)?;
    let j = &plan.judgement;
    match plan.step {
        Step::Refuse { record } => {
            recorder.record("exec_refused", record)?;
            let what = if j.decision == Action::Deny { "denied" } else { "needs a person's confirmation, and exec cannot ask" };
            say!("pinfold: {what}: {}", j.reason);
            if let Some(c) = j.commands.iter().find(|c| c.decision == j.decision) {
                if let Some(m) = &c.message {
                    say!("  message: {m}");
                }
                if let Some(f) = &c.fix {
                    say!("  fix: {f}");
                }
            }
            Ok(exit::EXEC_DENIED)
        }
        Step::Show { record, argv, sandbox } => {
            recorder.record("check", record)?;
            let sp = &sandbox.policy;
            let resolved = sp.plan().map_err(errors::sandbox)?;
            let out = serde_json::json!({
                "decision": j.decision,
                "reason": j.reason,
                "sandbox": sandbox.preset.name,
                "backend": sp.backend,
                "argv": argv,
                "cwd": sp.cwd,
                "plan": resolved,
                "keep_env": sp.keep_env,
            });
            println!("{}", serde_json::to_string_pretty(&out).expect("JSON values serialise"));
            Ok(exit::OK)
        }
        Step::Run(run) => {
            let report = args.report.as_deref().map(ReportFile::before).transpose()?;
            finish(pinfold_plan::run(*run, recorder, pre, dirs)?, report)
        }
    }
}

/// Where `--report` goes: its directory, opened before the command runs, and its name. The
/// report is written after the run into that very directory, to a regular file at that name,
/// never through a link: the command may write the directory (found: `ln -sf ~/victim
/// report.json` in the project, and the report overwrote `~/victim` outside the sandbox).
struct ReportFile {
    dir: std::fs::File,
    name: std::ffi::OsString,
    shown: PathBuf,
}

impl ReportFile {
    fn before(path: &Path) -> Result<ReportFile, Error> {
        use std::os::unix::fs::OpenOptionsExt;
        let bad = |why: &str| Error::new(format!("cannot write the report to {}: {why}", path.display()));
        let name = path.file_name().ok_or_else(|| bad("it names no file"))?.to_os_string();
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // Its directory reached through a link an earlier run could have planted in a
        // project, out of it (`out -> ~`, then `--report out/report.json`), or below the
        // working directory, which runs may write (a plain directory as the project): refused.
        if let Ok(abs) = std::path::absolute(parent) {
            if let Some((link, _, target)) = pinfold_plan::link_out_of_a_project(&abs) {
                return Err(bad(&format!("its directory is reached through {}, a link inside a project that leads out of it (to {})", link.display(), target.display())));
            }
            if let Ok(cwd) = std::env::current_dir()
                && let Some((link, ..)) = pinfold_plan::links_on_the_way(&abs).into_iter().find(|(link, ..)| link.starts_with(&cwd))
            {
                return Err(bad(&format!("its directory is reached through {}, a link below the working directory, which a run may have made", link.display())));
            }
        }
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(parent)
            .map_err(|e| bad("its directory cannot be opened").cause(e))?;
        Ok(ReportFile { dir, name, shown: path.to_path_buf() })
    }

    fn write(&self, text: &str) -> Result<(), Error> {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let bad = |e: std::io::Error| Error::new(format!("cannot write the report to {}", self.shown.display())).cause(e);
        // Through the directory's descriptor; no link followed at the name (O_NOFOLLOW), and
        // a FIFO planted there does not block the open (O_NONBLOCK); the type is checked.
        let at = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd())).join(&self.name);
        let mut file = match std::fs::OpenOptions::new().write(true).create(true).mode(0o644).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&at) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Error::new(format!("cannot write the report to {}: a link is there now, and the report is never written through one", self.shown.display()))
                    .hint("give --report a path the command cannot write, or remove the link"));
            }
            // A FIFO nobody reads (O_NONBLOCK: ENXIO rather than a wait).
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err(Error::new(format!("cannot write the report to {}: it is not a regular file", self.shown.display())));
            }
            Err(e) => return Err(bad(e)),
        };
        if !file.metadata().map_err(bad)?.is_file() {
            return Err(Error::new(format!("cannot write the report to {}: it is not a regular file", self.shown.display())));
        }
        file.set_len(0).map_err(bad)?;
        file.write_all(text.as_bytes()).map_err(bad)
    }
}

/// Report how a run ended; its exit status.
fn finish(f: Finished, report: Option<ReportFile>) -> Result<i32, Error> {
    if let Some(e) = &f.span_error {
        crate::report(e);
    }
    if let Some(e) = f.unrecorded {
        if let Ok(o) = &f.result {
            o.leave_unreaped();
        }
        return Err(e);
    }
    if !f.planted.is_empty() {
        // The command ran, but left files that would run later outside the sandbox: moved
        // aside, and the run is not a success whatever its status.
        if let Ok(o) = &f.result {
            o.leave_unreaped();
        }
        let mut e = Error::new(format!("the command created {} control file(s): programs outside the sandbox would run or obey them", f.planted.len()))
            .kind(pinfold_plan::Kind::Planted)
            .hint("a control file is written by a person, or by a command the user's own configuration lets write it (docs/design/threat-model.md)");
        // Why the run ended, when it did not end by itself (a protected path the host
        // changed stops it: the changed control file is then among those moved aside).
        if let Err(stop) = &f.result {
            e = e.cause(format!("the run: {stop}"));
        }
        for p in &f.planted {
            e = e.cause(match &p.moved_to {
                Some(to) => format!("{}: {}; moved to {}", p.path.display(), p.family.why(), to.display()),
                None => format!("{}: {}; it could not be moved aside", p.path.display(), p.family.why()),
            });
        }
        return Err(e);
    }
    for p in &f.restored {
        say!("pinfold: restored {}, which the command deleted", p.display());
    }
    if f.unprotected > 0 {
        say!(
            "pinfold: {} loose git objects were not protected during the run (over {}); `git gc` packs them",
            f.unprotected,
            pinfold_plan::git_guard::MAX_LOOSE
        );
    }
    if let Some(e) = &f.end_error {
        // The command ran, but its end is not in the ledger: say so, and do not pass its
        // status on as if all were well.
        if let Ok(o) = &f.result {
            o.leave_unreaped();
        }
        return Err(e.clone());
    }
    match f.result {
        Ok(outcome) => {
            // pinfold exits right after: the sandbox's last process need not be waited for.
            outcome.leave_unreaped();
            if let Some(file) = report {
                let json = serde_json::to_string_pretty(&outcome.report).expect("the report serialises");
                file.write(&(json + "\n"))?;
            }
            Ok(outcome.code)
        }
        Err(e) => Err(errors::sandbox(e)),
    }
}

pub fn doctor(args: DoctorArgs, dirs: &Dirs) -> Result<i32, Error> {
    let a = pinfold_sandbox::probe();
    let problems = a.problems();
    let cwd = std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?;
    let hooks = crate::hook::init::doctor_rows(&cwd, dirs);
    let hooks_ok = !hooks.iter().any(|h| h.problem);
    let backends = pinfold_sandbox::backend_statuses();
    if args.json {
        let out = serde_json::json!({
            "supported": a.supported(),
            "availability": a,
            "problems": problems.iter().map(|(layer, why, fix)| serde_json::json!({"layer": layer, "why": why, "fix": fix})).collect::<Vec<_>>(),
            "hooks": hooks,
            "hooks_ok": hooks_ok,
            "backends": backends,
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
        println!("\nbackends:");
        for b in &backends {
            println!("  {:<8} {}: {}", b.name, if b.available { "yes" } else { "no" }, b.detail);
            if let Some(fix) = &b.fix {
                println!("  {:<8} fix: {fix}", "");
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
