//! What `check`, `hook` and `exec` write to the audit ledger (docs/ledger.md, "What is
//! recorded").
//!
//! **Failure policy: fail closed.** When recording is on and a record cannot be written (no
//! state directory, a full disk, a damaged log), the decision it would have recorded does not
//! take effect: `check` exits 2 without a verdict, `hook` blocks the call the way the agent's
//! protocol blocks a failed hook, and `exec` runs nothing (125). The one exception is an
//! `exec_end` record, written after the command ran: that failure is reported on stderr and
//! `exec` exits 125 instead of the command's status, so a caller cannot mistake the run for an
//! audited one. Recording is turned off only by `[audit] enabled = false` in the user's own
//! configuration.
//!
//! **Durability.** Every record is in the kernel's page cache before the decision takes
//! effect, so it survives the crash or kill of any pinfold process. `exec_start` is also
//! `fdatasync`ed before the command starts, which makes every earlier record durable too.
//! `exec_end`, `check` and `hook` records reach the disk with the next synced record (the next
//! run's `exec_start`), the next checkpoint (always synced) or the kernel's writeback; a power
//! loss can lose the last of them, and a lost `exec_end` leaves a run whose start is on disk
//! and whose end is not: never a command that ran unrecorded. `PINFOLD_LEDGER_FSYNC=1` syncs
//! every record, `=0` none (docs/ledger.md).

use pinfold_ledger::{Ledger, Record};
use pinfold_policy::config::{Action, Audit};
use pinfold_policy::Judgement;
use serde::Serialize;
use serde_json::Value;

use crate::{Dirs, Error};

/// The environment variable an agent (or a person) sets to tag records with a session id; the
/// hook uses the one in the agent's payload instead.
pub const SESSION_ENV: &str = "PINFOLD_SESSION";

/// An open ledger, or nothing when the policy turned recording off.
#[derive(Debug)]
pub struct Recorder {
    ledger: Option<Ledger>,
    session: Option<String>,
    sync: Sync,
}

/// Which records are `fdatasync`ed (see the module's notes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sync {
    /// `exec_start` (the default).
    Runs,
    Every,
    Never,
}

impl Sync {
    fn from_env() -> Sync {
        match std::env::var("PINFOLD_LEDGER_FSYNC").ok().filter(|v| !v.is_empty()).as_deref() {
            None => Sync::Runs,
            Some("0") => Sync::Never,
            Some(_) => Sync::Every,
        }
    }

    fn syncs(self, kind: &str) -> bool {
        match self {
            Sync::Runs => kind == "exec_start",
            Sync::Every => true,
            Sync::Never => false,
        }
    }
}

impl Recorder {
    /// Open the ledger in the state directory (`dirs.state`), unless `audit` turns recording
    /// off. The session is `$PINFOLD_SESSION` unless [`Recorder::session`] sets another.
    pub fn open(audit: &Audit, dirs: &Dirs) -> Result<Recorder, Error> {
        let session = std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty());
        let sync = Sync::from_env();
        if !audit.enabled {
            return Ok(Recorder { ledger: None, session, sync });
        }
        let dir = dirs.ledger_dir().map_err(failed)?;
        let secrets = audit
            .redact_env
            .iter()
            .filter_map(|k| std::env::var(k).ok())
            // Very short values would redact ordinary text everywhere (`1`, `yes`).
            .filter(|v| v.len() >= 4)
            .collect();
        let ledger = Ledger::open(dir).map_err(failed)?.with_secrets(secrets);
        Ok(Recorder { ledger: Some(ledger), session, sync })
    }

    pub fn session(mut self, session: Option<String>) -> Recorder {
        if session.is_some() {
            self.session = session;
        }
        self
    }

    /// Append one record; its sequence number, or `None` when recording is off.
    pub fn record(&self, kind: &str, data: Value) -> Result<Option<u64>, Error> {
        let Some(ledger) = &self.ledger else { return Ok(None) };
        ledger.set_fsync(self.sync.syncs(kind));
        let mut r = Record::new(kind, data);
        if let Some(s) = &self.session {
            r = r.session(s.clone());
        }
        ledger.append(r).map(|a| Some(a.seq)).map_err(failed)
    }
}

fn failed(e: pinfold_ledger::Error) -> Error {
    Error::new("cannot record the decision in the audit ledger, so it does not take effect")
        .cause(e)
        .kind(crate::Kind::Unrecorded)
        .hint("fix the state directory ($PINFOLD_STATE_DIR, else $XDG_STATE_HOME/pinfold, else ~/.local/state/pinfold; `pinfold audit verify` says what is wrong), or turn recording off with `[audit] enabled = false` in ~/.config/pinfold/config.toml")
}

/// The verdict on a command as recorded: exactly what `pinfold check --json` prints (the
/// decision, the reason, and for each simple command its text, byte range, decision, preset
/// and the rules that matched, as pattern and file:line).
pub fn judgement(j: &Judgement) -> Value {
    serde_json::to_value(JsonJudgement::from(j)).expect("a judgement serialises")
}

/// A verdict as `pinfold check --json` prints it and the ledger records it, exactly as
/// documented.
#[derive(Debug, Serialize)]
pub struct JsonJudgement<'a> {
    decision: Action,
    reason: &'a str,
    commands: Vec<JsonCommand<'a>>,
    sandbox: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct JsonCommand<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    decision: Action,
    rules: Vec<JsonRule<'a>>,
    sandbox: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct JsonRule<'a> {
    action: Action,
    pattern: &'a str,
    source: String,
}

impl<'a> From<&'a Judgement> for JsonJudgement<'a> {
    fn from(j: &'a Judgement) -> Self {
        JsonJudgement {
            decision: j.decision,
            reason: &j.reason,
            commands: j
                .commands
                .iter()
                .map(|c| JsonCommand {
                    text: &c.text,
                    start: c.span.start,
                    end: c.span.end,
                    decision: c.decision,
                    rules: c
                        .rules
                        .iter()
                        .map(|r| JsonRule {
                            action: r.action,
                            pattern: &r.pattern,
                            source: format!("{}:{}", r.source.file, r.source.line),
                        })
                        .collect(),
                    sandbox: c.sandbox.as_deref(),
                })
                .collect(),
            sandbox: j.sandbox.as_deref(),
        }
    }
}

/// `text` with every hook token (`PINFOLD_HOOK_ORIGIN=v1.<expiry>.<64 hex>`) cut to its
/// first 16 hex digits: the record names which token, without holding one that still works.
pub fn shorten_tokens(text: &str) -> String {
    let marker = "PINFOLD_HOOK_ORIGIN=v1.";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(marker) {
        let (head, tail) = rest.split_at(i + marker.len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let mac_start = digits + 1;
        let mac_len = tail.as_bytes().get(digits) == Some(&b'.') && tail.len() >= mac_start + 64;
        if mac_len && tail[mac_start..mac_start + 64].bytes().all(|b| b.is_ascii_hexdigit()) {
            out.push_str(&tail[..mac_start + 16]);
            out.push('…');
            rest = &tail[mac_start + 64..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// The name a token is recorded under (see [`shorten_tokens`]).
pub fn token_id(token: &str) -> String {
    shorten_tokens(&format!("PINFOLD_HOOK_ORIGIN={token}"))["PINFOLD_HOOK_ORIGIN=".len()..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_starts_are_synced_by_default() {
        assert!(Sync::Runs.syncs("exec_start"));
        assert!(!Sync::Runs.syncs("exec_end") && !Sync::Runs.syncs("check") && !Sync::Runs.syncs("hook") && !Sync::Runs.syncs("exec_refused"));
        assert!(Sync::Every.syncs("check") && !Sync::Never.syncs("exec_start"));
    }

    #[test]
    fn tokens_are_shortened() {
        let mac = "ab".repeat(32);
        let t = format!("PINFOLD_HOOK_ORIGIN=v1.1700000000.{mac} pinfold exec -- 'ls' | PINFOLD_HOOK_ORIGIN=v1.1.{mac} x");
        let s = shorten_tokens(&t);
        assert_eq!(s, "PINFOLD_HOOK_ORIGIN=v1.1700000000.abababababababab… pinfold exec -- 'ls' | PINFOLD_HOOK_ORIGIN=v1.1.abababababababab… x");
        assert!(!s.contains(&mac));
        // Not a token: left alone.
        assert_eq!(shorten_tokens("PINFOLD_HOOK_ORIGIN=v1.x"), "PINFOLD_HOOK_ORIGIN=v1.x");
        assert_eq!(shorten_tokens("PINFOLD_HOOK_ORIGIN=v1.5.abc"), "PINFOLD_HOOK_ORIGIN=v1.5.abc");
        assert_eq!(token_id(&format!("v1.9.{mac}")), "v1.9.abababababababab…");
    }
}
