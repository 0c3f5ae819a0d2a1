//! [`run`]: carry out a [`Run`] — start the egress proxy, record the start, hold the roots'
//! span, run the sandbox, restore git, record the end. Nothing here decides anything: the
//! plan did.

use std::path::PathBuf;

use pinfold_sandbox::{Network, Outcome, Prestart, SandboxError};

use crate::egress::Egress;
use crate::plan::Run;
use crate::record::Recorder;
use crate::{trust, Dirs, Error, Kind};

/// How a run ended, for the caller to report.
#[derive(Debug)]
pub struct Finished {
    /// The command's outcome, or why the sandbox could not run it.
    pub result: Result<Outcome, SandboxError>,
    /// The roots' span could not be closed; it stays open until a later pinfold finds this
    /// process gone: later than it should, so stricter, never laxer.
    pub span_error: Option<Error>,
    /// Refs the command deleted, written back.
    pub restored: Vec<PathBuf>,
    /// Loose git objects left unprotected (over [`crate::git_guard::MAX_LOOSE`]).
    pub unprotected: usize,
    /// Control files the command created, moved aside: the run does not count as a success.
    pub planted: Vec<crate::control::Planted>,
    /// The `exec_end` record could not be written: the command ran, but its end is not in the
    /// ledger.
    pub end_error: Option<Error>,
    /// The start (or a decision of the egress proxy) could not be recorded, so the run does
    /// not count as one: nothing ran, or what ran is not to be passed on as audited. Nothing
    /// after it happened (no `exec_end`, no git restore).
    pub unrecorded: Option<Error>,
}

/// Run `run` in its sandbox (started ahead with `pre`, if given), recording into `recorder`.
/// `Err`: the egress proxy could not start, and nothing ran.
pub fn run(run: Run, recorder: Recorder, pre: Option<Prestart>, dirs: &Dirs) -> Result<Finished, Error> {
    let Run { text, argv, record, sandbox, loaded, audit, credentials } = run;
    let mut sp = sandbox.policy;
    let guard = sandbox.guard;
    let control = sandbox.control;
    // Undo: the store made (so the sandbox hides an existing directory), the run's journal
    // begun; it writes nothing until the command changes something. A run whose changes
    // cannot be kept does not start: the policy may have allowed it because undo was there.
    let mut journal = match &sandbox.undo {
        Some(store) => Some(store.prepare().and_then(|()| store.begin(&text, &sp.cwd)).map_err(undo_error)?),
        None => None,
    };
    let _busy = sandbox.busy.iter().map(pinfold_undo::Store::hold).collect::<Result<Vec<_>, _>>().map_err(undo_error)?;
    // The egress proxy, when the network goes through it: started (and its secrets read)
    // before the run, serving the listener the sandbox makes inside its namespace as soon as
    // it arrives.
    let egress = match &credentials {
        Some(credentials) if sp.network == Network::Proxy => {
            let r = Recorder::open(&audit, dirs)?;
            let e = Egress::start(&sandbox.preset, credentials, r).map_err(|e| e.kind(Kind::Setup))?;
            sp.set_env.extend(e.ca_env());
            // The secrets never reach the command: not their variables, not their files.
            sp.remove_env.extend(e.secret_vars.iter().cloned());
            sp.read_deny.extend(e.secret_files.iter().cloned());
            Some(e)
        }
        _ => None,
    };

    // Recorded before anything runs: a run that cannot be recorded does not happen. The
    // append (with its fdatasync) runs on its own thread while the sandbox is resolved, and
    // the sandbox waits for it before it takes the command (`release`).
    let started = std::time::Instant::now();
    // The writable roots are recorded as open to a sandboxed command before it starts, so that
    // policy files it could plant there are not read later without a person's say (trust.rs).
    let roots = sp.writable.clone();
    let state = dirs.clone();
    let mut pending = Some(std::thread::spawn(move || {
        let r = recorder.record("exec_start", record);
        let r = r.and_then(|seq| trust::begin_run(&roots, &loaded, &state).map(|span| (seq, span)).map_err(|e| e.kind(Kind::Unrecorded)));
        (recorder, r)
    }));
    type Started = (Recorder, Result<(Option<u64>, trust::RunSpan), Error>);
    let join = |h: std::thread::JoinHandle<Started>| h.join().expect("the recording thread does not panic");
    let mut start: Option<Started> = None;
    let mut keep = |c: &pinfold_sandbox::Change| journal.as_mut().map_or(Ok(()), |j| j.before(c));
    let result = sp.run_with(
        &argv,
        pre,
        pinfold_sandbox::Hooks {
            release: &mut || {
                let s = start.insert(join(pending.take().expect("released once")));
                s.1.as_ref().map(drop).map_err(|e| Box::new(e.clone()) as Box<dyn std::error::Error + Send + Sync>)
            },
            listener: &mut |listener| {
                if let Some(e) = &egress {
                    e.serve(listener);
                }
            },
            observer: Some(&mut keep),
        },
    );
    // What the run changed is written down: the record closed, its size in exec_end.
    let exit = result.as_ref().ok().map(|o| o.code);
    let undo = journal.take().map(|j| {
        let id = j.id().to_string();
        (id, j.finish(exit))
    });
    // Every connection ends with the run; each decision is in the ledger before exec_end.
    let egress_recorded = egress.map(Egress::finish);
    if let Some(h) = pending.take() {
        start = Some(join(h));
    }
    let Some((recorder, started_rec)) = start else { unreachable!("joined in release or above") };
    let (start_seq, span) = match started_rec {
        Ok((seq, span)) => (Ok(seq), Some(span)),
        Err(e) => (Err(e), None),
    };
    // The command and everything it started have ended: close the roots' span.
    let span_error = span.map(trust::RunSpan::end).and_then(Result::err);
    let start_seq = match (start_seq, egress_recorded) {
        (Ok(_), Some(Err(e))) => Err(e),
        (s, _) => s,
    };
    let start_seq = match start_seq {
        Ok(s) => s,
        Err(e) => {
            let unrecorded = Some(e);
            // Nothing of the command's may stay planted, recorded or not.
            let planted = control.after();
            return Ok(Finished { result, span_error, restored: Vec::new(), unprotected: 0, planted, end_error: None, unrecorded });
        }
    };
    let mut end = serde_json::json!({
        "command": text,
        "start_seq": start_seq,
        "duration_us": started.elapsed().as_micros() as u64,
    });
    let planted = control.after();
    if !planted.is_empty() {
        end["planted"] = serde_json::json!(planted);
    }
    match &undo {
        Some((id, Ok(n))) if *n > 0 => {
            end["undo"] = serde_json::json!({"record": id, "changes": n});
            if let Some(store) = &sandbox.undo {
                let _ = store.prune();
            }
        }
        Some((_, Err(e))) => end["undo"] = serde_json::json!({"error": e.to_string()}),
        _ => {}
    }
    match &result {
        Ok(o) => {
            end["exit"] = o.code.into();
            end["sandbox"] = report_summary(&o.report);
        }
        Err(e) => {
            end["exit"] = crate::EXEC_SETUP.into();
            end["error"] = e.to_string().into();
        }
    }
    let end_error = recorder.record("exec_end", end).err();
    let restored = guard.after();
    Ok(Finished { result, span_error, restored, unprotected: guard.unprotected, planted, end_error, unrecorded: None })
}

fn undo_error(e: pinfold_undo::Error) -> Error {
    let mut out = Error::new(format!("cannot keep this run's changes for undo: {}", e.message)).kind(Kind::Setup);
    if let Some(h) = e.hint {
        out = out.hint(h);
    }
    out
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
