//! `pinfold undo`: put back what the most recent sandboxed commands changed in the project
//! (pinfold-undo does the work; this prints it and records it in the ledger).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use pinfold_plan::{record::Recorder, Dirs, Error};
use pinfold_undo::{Kind, Record, RecordKind, Store};

#[derive(Debug, Args)]
pub(crate) struct UndoArgs {
    /// How many sandboxed commands to go back: their changes are put back together.
    #[arg(value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
    /// List the recent commands that can be undone, newest first (N for `pinfold undo N`).
    #[arg(long, conflicts_with = "redo")]
    list: bool,
    /// Take back the most recent undo: what it replaced comes back.
    #[arg(long)]
    redo: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// The project: the git repository holding DIR (default: the working directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// The policy file whose `[audit]` settings apply (as for `check -c`).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
}

fn undo_err(e: pinfold_undo::Error) -> Error {
    let mut out = Error::new(e.message);
    if let Some(h) = e.hint {
        out = out.hint(h);
    }
    out
}

pub(crate) fn run(args: UndoArgs, dirs: &Dirs) -> Result<i32, Error> {
    let cwd = match &args.cwd {
        Some(d) => crate::absolute(d)?,
        None => std::env::current_dir().map_err(|e| Error::new("cannot read the working directory").cause(e))?,
    };
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let store = Store::locate(&cwd, dirs.state.as_deref()).map_err(undo_err)?;
    if args.list {
        return list(&store, args.json);
    }
    // The ledger first: an undo that cannot be recorded does not happen.
    let policy = crate::load_policy(args.config.as_deref(), Some(&cwd), true, dirs)?;
    let recorder = Recorder::open(&policy.config().audit, dirs)?;
    // What the undo puts back is the project's own earlier state, but the records are a
    // command's doing: a control file the undo would create (a directory moved back to
    // `.claude`, say) is moved aside afterwards, as after a run.
    let config = policy.config();
    let guard = pinfold_plan::control::Guard::before(
        &store.root,
        &cwd,
        dirs.home.as_deref(),
        dirs.xdg_config_home.as_deref(),
        std::slice::from_ref(&store.root),
        &config.control_lift,
    );
    let done = if args.redo { store.redo(&cwd) } else { store.undo(args.n as usize, &cwd) };
    let planted = guard.after();
    let out = match done {
        Ok(o) => o,
        Err(e) if e.kind == Kind::Nothing => {
            crate::report(&undo_err(e));
            return Ok(1);
        }
        Err(e) => {
            warn_planted(&planted);
            return Err(undo_err(e));
        }
    };
    warn_planted(&planted);
    let restored: Vec<serde_json::Value> =
        out.restored.iter().map(|r| serde_json::json!({"path": r.path.display().to_string(), "action": r.action})).collect();
    let left: Vec<serde_json::Value> = out.left.iter().map(|(p, why)| serde_json::json!({"path": p.display().to_string(), "why": why})).collect();
    let data = serde_json::json!({
        "project": store.root.display().to_string(),
        "redo": args.redo,
        "record": out.id,
        "undid": out.undone.iter().map(|(id, cmd)| serde_json::json!({"record": id, "command": cmd})).collect::<Vec<_>>(),
        "restored": restored.len(),
        "left": left.len(),
        "planted": planted,
    });
    recorder.record("undo", data)?;
    let mut o = std::io::stdout().lock();
    if args.json {
        let v = serde_json::json!({"record": out.id, "undid": out.undone.iter().map(|(id, cmd)| serde_json::json!({"record": id, "command": cmd})).collect::<Vec<_>>(), "restored": restored, "left": left});
        let _ = writeln!(o, "{v}");
        return Ok(0);
    }
    let what = if args.redo { "took back the last undo" } else { "undid" };
    for (_, cmd) in &out.undone {
        let _ = writeln!(o, "{what}: {}", crate::shown(&one_line(cmd)));
    }
    for r in &out.restored {
        let _ = writeln!(o, "  {:<12} {}", r.action, crate::shown(&r.path.display().to_string()));
    }
    if out.restored.is_empty() {
        let _ = writeln!(o, "  (every path was already as it was)");
    }
    if !out.left.is_empty() {
        let _ = writeln!(o, "left as they are:");
        for (p, why) in &out.left {
            let _ = writeln!(o, "  {}: {}", crate::shown(&p.display().to_string()), crate::shown(why));
        }
    }
    let _ = writeln!(o, "to take this back: pinfold undo --redo");
    Ok(0)
}

/// Control files the undo would have created, moved aside.
fn warn_planted(planted: &[pinfold_plan::control::Planted]) {
    for p in planted {
        match &p.moved_to {
            Some(to) => say!("pinfold: the undo would have created the control file {} ({}); moved to {}", crate::shown(&p.path.display().to_string()), p.family.why(), crate::shown(&to.display().to_string())),
            None => say!("pinfold: the undo created the control file {} ({}), and it could not be moved aside", crate::shown(&p.path.display().to_string()), p.family.why()),
        }
    }
}


fn one_line(cmd: &str) -> String {
    let flat: String = cmd.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 100 { format!("{}…", flat.chars().take(99).collect::<String>()) } else { flat }
}

fn list(store: &Store, json: bool) -> Result<i32, Error> {
    let all = store.list().map_err(undo_err)?;
    let open: Vec<&Record> = all.iter().filter(|r| r.meta.kind == RecordKind::Exec && r.undone.is_none() && !r.entries.is_empty()).rev().collect();
    let redo = all.iter().rev().find(|r| r.meta.kind == RecordKind::Undo && r.undone.is_none());
    let mut o = std::io::stdout().lock();
    if json {
        let items: Vec<serde_json::Value> = open
            .iter()
            .enumerate()
            .map(|(i, r)| {
                serde_json::json!({
                    "n": i + 1,
                    "record": r.meta.id,
                    "started": pinfold_ledger::time::format(std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.started_s())),
                    "command": r.meta.command,
                    "cwd": r.meta.cwd,
                    "ended": r.ended,
                    "exit": r.exit,
                    "changed": r.paths().iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let _ = writeln!(o, "{}", serde_json::json!({"project": store.root.display().to_string(), "commands": items, "redo": redo.map(|r| &r.meta.id)}));
        return Ok(0);
    }
    if open.is_empty() {
        let _ = writeln!(o, "nothing to undo in {}", store.root.display());
    }
    for (i, r) in open.iter().enumerate() {
        let when = pinfold_ledger::time::format(std::time::UNIX_EPOCH + std::time::Duration::from_secs(r.started_s()));
        let paths = r.paths();
        let names: Vec<String> = paths.iter().take(4).map(|p| crate::shown(&p.display().to_string())).collect();
        let more = if paths.len() > 4 { format!(" and {} more", paths.len() - 4) } else { String::new() };
        let state = if r.ended { String::new() } else { " (did not finish)".to_string() };
        let _ = writeln!(o, "{:>3}  {when}  {}{state}", i + 1, crate::shown(&one_line(&r.meta.command)));
        let _ = writeln!(o, "     changed {}: {}{more}", paths.len(), names.join(", "));
    }
    if let Some(r) = redo {
        let _ = writeln!(o, "the last undo ({}) can be taken back: pinfold undo --redo", crate::shown(&one_line(&r.meta.command)));
    }
    Ok(0)
}
