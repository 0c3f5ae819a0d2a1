//! `pinfold audit`: verify, read, repair and checkpoint the audit ledger (docs/ledger.md).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use pinfold_ledger::{Ledger, Status};
use serde_json::Value;

use crate::anyhow_lite::Error;
use crate::exit;

/// `audit verify`: the log was changed (a record edited, removed, reordered; truncated or
/// rewritten after a checkpoint).
pub const TAMPERED: i32 = 1;
/// `audit verify`: intact except a torn last line left by a crashed writer; `audit repair`.
pub const TORN: i32 = 3;

pub const VERIFY_HELP: &str = "\
Exit status: 0 intact, 1 tampered (the first bad record is printed), 2 usage error or the
ledger cannot be read, 3 intact but for a torn last line (a writer crashed): run `pinfold audit
repair`.";

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
    },
    /// Print records, oldest first (the first --limit that match).
    Show(Filter),
    /// Print the most recent records (the last --limit that match, default 20).
    Tail(Filter),
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

pub fn run(args: AuditArgs) -> Result<i32, Error> {
    let dir = match args.state_dir {
        Some(d) => d,
        None => pinfold_ledger::state_dir().map_err(|e| Error::new(e.to_string()))?,
    };
    let ledger_err = |e: pinfold_ledger::Error| {
        let mut out = Error::new(e.to_string());
        if let Some(s) = std::error::Error::source(&e) {
            out = out.cause(s);
        }
        out
    };
    match args.command {
        AuditCommand::Verify { json } => {
            let r = pinfold_ledger::verify(&dir).map_err(ledger_err)?;
            if json {
                let mut v = serde_json::to_value(&r).expect("a report serialises");
                v["status"] = serde_json::to_value(r.status()).expect("serialises");
                v["problem_text"] = r.problem.as_ref().map_or(Value::Null, |p| Value::String(p.fault.to_string()));
                println!("{v}");
            } else {
                match (&r.problem, &r.torn) {
                    (Some(p), _) => println!("TAMPERED: {p}"),
                    (None, Some(t)) => println!(
                        "torn: the last {} bytes (from byte {}) are an incomplete record left by a writer that stopped mid-append; `pinfold audit repair` removes them",
                        t.len, t.offset
                    ),
                    (None, None) => {}
                }
                println!(
                    "{}: {} records, {} bytes, {} signed checkpoints in the log, {} in {}",
                    match r.status() {
                        Status::Intact => "intact",
                        Status::Torn => "intact but torn",
                        Status::Tampered => "checked up to the problem",
                    },
                    r.records,
                    r.bytes,
                    r.checkpoints,
                    r.external_checkpoints,
                    dir.join("ledger.checkpoints").display()
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
            let recs = pinfold_ledger::read_records(&dir).map_err(ledger_err)?;
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
        AuditCommand::Show(f) => show(&dir, f, false),
        AuditCommand::Tail(f) => show(&dir, f, true),
    }
}

fn show(dir: &std::path::Path, f: Filter, tail: bool) -> Result<i32, Error> {
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
    let records = pinfold_ledger::read_records(dir).map_err(|e| Error::new(e.to_string()))?;
    let s = |r: &Value, k: &str| r[k].as_str().map(str::to_string);
    let matching = records.iter().filter(|r| {
        let time = r["time"].as_str().unwrap_or("");
        since.as_deref().is_none_or(|t| time >= t)
            && until.as_deref().is_none_or(|t| time < t)
            && f.decision.as_deref().is_none_or(|d| r["data"]["decision"].as_str() == Some(d))
            && f.session.as_deref().is_none_or(|x| s(r, "session").as_deref() == Some(x))
            && f.command.as_deref().is_none_or(|g| r["data"]["command"].as_str().is_some_and(|c| glob(g, c)))
    });
    let mut picked: Vec<&Value> = matching.collect();
    let limit = f.limit.or(tail.then_some(20));
    if let Some(n) = limit {
        if tail {
            picked.drain(..picked.len().saturating_sub(n));
        } else {
            picked.truncate(n);
        }
    }
    let mut out = String::new();
    for r in picked {
        if f.json {
            out.push_str(&r.to_string());
        } else {
            let d = &r["data"];
            let what = d["command"].as_str().map(str::to_string).unwrap_or_else(|| {
                let mut t = d.to_string();
                t.truncate(100);
                t
            });
            out.push_str(&format!(
                "{:>7}  {}  {:<10}  {:<5}  {}",
                r["seq"],
                r["time"].as_str().map_or("", |t| &t[..t.len().min(19)]),
                r["kind"].as_str().unwrap_or(""),
                d["decision"].as_str().unwrap_or("-"),
                what.replace('\n', "\\n")
            ));
        }
        out.push('\n');
    }
    print!("{out}");
    Ok(exit::OK)
}

/// `*` any text (also none), `?` one character, everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    #[test]
    fn glob() {
        assert!(super::glob("git *", "git push --force"));
        assert!(super::glob("*rm -rf*", "sudo rm -rf /"));
        assert!(super::glob("l?", "ls"));
        assert!(!super::glob("git *", "cargo test"));
    }
}
