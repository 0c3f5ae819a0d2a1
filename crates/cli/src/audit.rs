//! `pinfold audit`: verify, read, follow, repair and checkpoint the audit ledger
//! (docs/ledger.md).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use pinfold_ledger::{Follower, Ledger, Status};
use serde_json::Value;

use pinfold_plan::Error;
use crate::exit;

/// `audit verify`: the log was changed (a record edited, removed, reordered; truncated or
/// rewritten after a checkpoint).
pub const TAMPERED: i32 = 1;
/// `audit verify`: intact except a torn last line left by a crashed writer; `audit repair`.
pub const TORN: i32 = 3;

pub const VERIFY_HELP: &str = "\
Checks the archives (ledger.000001.jsonl, ...) and the live ledger.jsonl as one chain, or with
--file one file on its own.

Exit status: 0 intact, 1 tampered (the first bad record is printed), 2 usage error or the
ledger cannot be read, 3 intact but for a torn last line (a writer crashed): run `pinfold audit
repair`.";

/// How often `tail --follow` looks for new records.
const FOLLOW_POLL: Duration = Duration::from_millis(150);

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The ledger's directory; default $PINFOLD_STATE_DIR, else $XDG_STATE_HOME/pinfold, else
    /// ~/.local/state/pinfold.
    #[arg(long, value_name = "DIR", global = true)]
    state_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check sequence, links, hashes, checkpoints and signatures; print the first bad record.
    #[command(after_help = VERIFY_HELP)]
    Verify {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Check this one file alone (an archive, or the live file): its records and
        /// signatures, that an archive ends with its closing checkpoint and opens with a
        /// `rotate` record naming the file before it.
        #[arg(long, value_name = "PATH")]
        file: Option<PathBuf>,
    },
    /// Print records, oldest first (the first --limit that match).
    Show(Filter),
    /// Print the most recent records (the last --limit that match, default 20).
    Tail(TailArgs),
    /// Truncate a torn last line (and only that) and append a `repair` record saying so.
    #[command(after_help = "Exit status: 0 repaired or nothing to repair, 2 the ledger is damaged otherwise or cannot be written.")]
    Repair,
    /// Write a signed checkpoint now and print it.
    Checkpoint {
        /// Print the checkpoint record as JSON (to keep a copy elsewhere).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct TailArgs {
    #[command(flatten)]
    filter: Filter,
    /// Then keep printing records as they are appended (across rotations), until interrupted.
    #[arg(short = 'f', long)]
    follow: bool,
}

#[derive(Debug, Args)]
struct Filter {
    /// Only records at or after T: a UTC time prefix (2026-04-20, 2026-04-20T12:30) or an age (90s, 15m, 2h, 7d).
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Only records before T (same forms as --since).
    #[arg(long, value_name = "T")]
    until: Option<String>,
    /// Only records with this decision (allow, ask, deny).
    #[arg(long, value_name = "D")]
    decision: Option<String>,
    /// Only records whose command matches GLOB (`*` any text, `?` one character).
    #[arg(long, value_name = "GLOB")]
    command: Option<String>,
    /// Only records of this agent session.
    #[arg(long, value_name = "S")]
    session: Option<String>,
    /// Print records as JSON Lines, as stored.
    #[arg(long)]
    json: bool,
    /// At most N records.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

pub fn run(args: AuditArgs, dirs: &pinfold_plan::Dirs) -> Result<i32, Error> {
    let dir = match args.state_dir {
        Some(d) => d,
        None => dirs.ledger_dir().map_err(|e| Error::new(e.to_string()))?.to_path_buf(),
    };
    let ledger_err = |e: pinfold_ledger::Error| {
        let mut out = Error::new(e.to_string());
        if let Some(s) = std::error::Error::source(&e) {
            out = out.cause(s);
        }
        out
    };
    match args.command {
        AuditCommand::Verify { json, file } => {
            let r = match &file {
                Some(f) => pinfold_ledger::verify_file(&dir, f),
                None => pinfold_ledger::verify(&dir),
            }
            .map_err(ledger_err)?;
            if json {
                let mut v = serde_json::to_value(&r).expect("a report serialises");
                v["status"] = serde_json::to_value(r.status()).expect("serialises");
                v["problem_text"] = r.problem.as_ref().map_or(Value::Null, |p| Value::String(p.fault.to_string()));
                println!("{v}");
            } else {
                match (&r.problem, &r.torn) {
                    (Some(p), _) => println!("TAMPERED: {p}"),
                    (None, Some(t)) => println!(
                        "torn: the last {} bytes (from byte {} of {}) are an incomplete record left by a writer that stopped mid-append; `pinfold audit repair` removes them",
                        t.len,
                        t.offset,
                        t.file.display()
                    ),
                    (None, None) => {}
                }
                let files = r.files.len();
                println!(
                    "{}: {} records in {files} file{}, {} bytes, {} signed checkpoints in the log, {} in {}{}",
                    match r.status() {
                        Status::Intact => "intact",
                        Status::Torn => "intact but torn",
                        Status::Tampered => "checked up to the problem",
                    },
                    r.records,
                    if files == 1 { "" } else { "s" },
                    r.bytes,
                    r.checkpoints,
                    r.external_checkpoints,
                    dir.join("ledger.checkpoints").display(),
                    if r.signing_key_checked && r.problem.is_none() { "; ledger.pub matches the signing key" } else { "" }
                );
            }
            Ok(match r.status() {
                Status::Intact => exit::OK,
                Status::Torn => TORN,
                Status::Tampered => TAMPERED,
            })
        }
        AuditCommand::Repair => {
            let r = pinfold_ledger::verify(&dir).map_err(ledger_err)?;
            if let Some(p) = r.problem {
                return Err(Error::new("the ledger was tampered with; repair only removes a torn last line")
                    .cause(p)
                    .hint("`pinfold audit verify` shows the first bad record"));
            }
            match Ledger::open(&dir).and_then(|l| l.repair()).map_err(ledger_err)? {
                Some(rep) => println!(
                    "repaired: removed {} torn bytes at byte {}; recorded as seq {}",
                    rep.len, rep.offset, rep.record.seq
                ),
                None => println!("nothing to repair"),
            }
            Ok(exit::OK)
        }
        AuditCommand::Checkpoint { json } => {
            let ledger = Ledger::open(&dir).map_err(ledger_err)?;
            let a = ledger.checkpoint().map_err(ledger_err)?;
            // It is in the live file (a checkpoint never rotates it).
            let live = std::fs::read(&ledger.paths().log).unwrap_or_default();
            let recs = pinfold_ledger::files::parse_records(&live);
            let rec = recs.iter().rev().find(|r| r["seq"] == a.seq).cloned().unwrap_or(Value::Null);
            if json {
                println!("{rec}");
            } else {
                println!(
                    "checkpoint seq {}: {} records, {} bytes, head {}, signed by {}",
                    a.seq, rec["data"]["records"], rec["data"]["size"], rec["data"]["head"].as_str().unwrap_or(""),
                    ledger.paths().key.display()
                );
            }
            Ok(exit::OK)
        }
        AuditCommand::Show(f) => show(&dir, f, false, false),
        AuditCommand::Tail(t) => show(&dir, t.filter, true, t.follow),
    }
}

fn show(dir: &Path, f: Filter, tail: bool, follow: bool) -> Result<i32, Error> {
    let bound = |s: &Option<String>, flag: &str| -> Result<Option<String>, Error> {
        s.as_deref()
            .map(|t| {
                pinfold_ledger::time::parse_bound(t).ok_or_else(|| {
                    Error::new(format!("{flag} {t:?} is not a time"))
                        .hint("give a UTC time prefix like 2026-04-20T12:30 or an age like 15m, 2h, 7d")
                })
            })
            .transpose()
    };
    let since = bound(&f.since, "--since")?;
    let until = bound(&f.until, "--until")?;
    let s = |r: &Value, k: &str| r[k].as_str().map(str::to_string);
    let matches = |r: &Value| {
        let time = r["time"].as_str().unwrap_or("");
        since.as_deref().is_none_or(|t| time >= t)
            && until.as_deref().is_none_or(|t| time < t)
            && f.decision.as_deref().is_none_or(|d| r["data"]["decision"].as_str() == Some(d))
            && f.session.as_deref().is_none_or(|x| s(r, "session").as_deref() == Some(x))
            && f.command.as_deref().is_none_or(|g| r["data"]["command"].as_str().is_some_and(|c| glob(g, c)))
    };
    let read_err = |e: pinfold_ledger::Error| Error::new(e.to_string());
    // Following starts before the backlog is read, so that nothing appended in between is
    // missed; what the backlog already showed is skipped by sequence number.
    let mut follower = if follow { Some(Follower::from_end(dir).map_err(read_err)?) } else { None };
    let files = pinfold_ledger::files::snapshot(dir).map_err(read_err)?;
    let limit = f.limit.or(tail.then_some(20));
    let mut picked: Vec<Value> = Vec::new();
    let mut last_seq = None;
    if tail {
        // Newest file first, until enough records match.
        for file in files.iter().rev() {
            let recs = pinfold_ledger::files::parse_records(&file.read().map_err(read_err)?);
            if last_seq.is_none() {
                last_seq = recs.last().and_then(|r| r["seq"].as_u64());
            }
            let mut here: Vec<Value> = recs.into_iter().filter(|r| matches(r)).collect();
            here.append(&mut picked);
            picked = here;
            if limit.is_some_and(|n| picked.len() >= n) {
                break;
            }
        }
        if let Some(n) = limit {
            picked.drain(..picked.len().saturating_sub(n));
        }
    } else {
        'files: for file in &files {
            for r in pinfold_ledger::files::parse_records(&file.read().map_err(read_err)?) {
                if limit.is_some_and(|n| picked.len() >= n) {
                    break 'files;
                }
                if matches(&r) {
                    picked.push(r);
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if !print(&mut out, &picked, f.json)? {
        return Ok(exit::OK);
    }
    let Some(follower) = follower.as_mut() else { return Ok(exit::OK) };
    if let Some(seq) = last_seq {
        follower.skip_through(seq);
    }
    // Until interrupted (SIGINT's default action ends the process) or the reader goes away.
    loop {
        let new: Vec<Value> = follower.poll().map_err(read_err)?.into_iter().filter(|r| matches(r)).collect();
        if !print(&mut out, &new, f.json)? {
            return Ok(exit::OK);
        }
        std::thread::sleep(FOLLOW_POLL);
    }
}

/// Print records, one a line. `Ok(false)` when stdout was closed (`| head`): the command
/// then ends quietly, as with SIGPIPE, rather than with a panic.
fn print(out: &mut impl Write, records: &[Value], json: bool) -> Result<bool, Error> {
    if records.is_empty() {
        return Ok(true);
    }
    let mut text = String::new();
    for r in records {
        if json {
            text.push_str(&r.to_string());
        } else {
            let d = &r["data"];
            let what = d["command"].as_str().map(str::to_string).unwrap_or_else(|| {
                let mut t = d.to_string();
                // (At a character boundary: data may hold any text.)
                let cut = (0..=t.len().min(100)).rev().find(|&i| t.is_char_boundary(i)).unwrap_or(0);
                t.truncate(cut);
                t
            });
            text.push_str(&format!(
                "{:>7}  {}  {:<10}  {:<5}  {}",
                r["seq"],
                r["time"].as_str().map_or("", |t| &t[..t.len().min(19)]),
                r["kind"].as_str().unwrap_or(""),
                d["decision"].as_str().unwrap_or("-"),
crate::shown(&what)
            ));
        }
        text.push('\n');
    }
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(Error::new("cannot write to stdout").cause(e)),
    }
}

/// `*` any text (also none), `?` one character, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    pinfold_glob::is_match(pattern, text, pinfold_glob::Syntax::STAR_QUESTION)
}

#[cfg(test)]
mod tests {
    #[test]
    fn glob() {
        assert!(super::glob("git *", "git push --force"));
        assert!(super::glob("*rm -rf*", "sudo rm -rf /"));
        assert!(super::glob("l?", "ls"));
        assert!(!super::glob("git *", "cargo test"));
        assert!(super::glob("rm *", "rm *.txt"), "a `*` in the text is text like any other");
    }
}
