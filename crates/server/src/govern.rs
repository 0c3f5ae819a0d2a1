//! The choke point. Every governed call — REST, MCP, the dashboard, an approved action — comes
//! through [`govern`]: the action made canonical, judged by the same library functions
//! `pinfold exec` and the hooks call (`pinfold_plan::plan`, `pinfold_plan::files`), an
//! approval asked for when the verdict is *ask*, the run in its sandbox, an intent record
//! before and an outcome record after. A call whose intent cannot be recorded does not happen.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pinfold_plan::files::{read_check_in, write_check_in};
use pinfold_plan::record::Recorder;
use pinfold_plan::Context;
use pinfold_policy::config::{Action as Verdict, SandboxPreset};
use pinfold_policy::Policy;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::db::{self, Actor, Approval, Sandbox};
use crate::error::ApiError;
use crate::paths::{self, Root};
use crate::run::{self, Chunk, Output};
use crate::App;

/// What a caller asks for.
#[derive(Debug, Clone)]
pub enum Action {
    Exec { text: String, stdin: Option<String>, timeout_s: u64 },
    Read { path: String },
    Write { path: String, bytes: Vec<u8> },
    Delete { path: String },
    List { path: String },
}

/// What came of it.
#[derive(Debug)]
pub enum Governed {
    Ran { output: Output, verdict: Verdict },
    Pending(Approval),
    Bytes(Vec<u8>),
    Entries(Vec<(String, &'static str, u64)>),
    Done,
}

impl Action {
    /// The canonical form, as recorded and as an approval binds it. Paths are normalised
    /// beneath the workspace before this is made.
    fn canonical(&self, sb: &Sandbox) -> Value {
        let base = json!({"sandbox": sb.id, "workspace": sb.workspace, "preset": sb.preset});
        let mut v = match self {
            Action::Exec { text, stdin, timeout_s } => json!({"kind": "exec", "command": text, "stdin": stdin, "timeout_s": timeout_s}),
            Action::Read { path } => json!({"kind": "read_file", "path": path}),
            Action::Write { path, bytes } => json!({"kind": "write_file", "path": path, "bytes": bytes.len(), "sha256": hex(&Sha256::digest(bytes))}),
            Action::Delete { path } => json!({"kind": "delete_file", "path": path}),
            Action::List { path } => json!({"kind": "list_dir", "path": path}),
        };
        for (k, x) in base.as_object().expect("an object") {
            v[k] = x.clone();
        }
        v
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The hash an approval binds: SHA-256 of the canonical action's JSON (keys sorted).
pub fn action_hash(action: &Value) -> String {
    hex(&Sha256::digest(action.to_string().as_bytes()))
}

fn load_policy(app: &App, sb: &Sandbox, workspace: &Path) -> Result<Policy, ApiError> {
    pinfold_plan::load::policy(None, Some(workspace), true, &app.dirs_for(&sb.id)).map_err(|e| ApiError::Policy(e.to_string()))
}

fn recorder(app: &App, policy: &Policy) -> Result<Recorder, ApiError> {
    Recorder::open(&policy.config().audit, &app.dirs).map_err(|e| {
        crate::log(&format!("ledger: {e}"));
        ApiError::Unrecorded
    })
}

fn record(r: &Recorder, kind: &str, data: Value) -> Result<(), ApiError> {
    r.record(kind, data).map(drop).map_err(|e| {
        crate::log(&format!("ledger: {e}"));
        ApiError::Unrecorded
    })
}

/// The preset file calls are checked against: the sandbox's own, else the policy's default.
fn file_preset<'a>(policy: &'a Policy, sb: &Sandbox) -> Result<&'a SandboxPreset, ApiError> {
    let config = policy.config();
    let name = sb.preset.clone().or_else(|| config.defaults.sandbox.clone());
    name.and_then(|n| config.sandboxes.get(&n))
        .ok_or_else(|| ApiError::Policy("the policy names no default sandbox preset for file calls".into()))
}

/// Govern one call by `actor` in `sb`. `approved`: the approval a person gave for exactly this
/// action (its canonical hash checked by the caller); `chunks`: stream the output.
pub async fn govern(app: &App, actor: &Actor, sb: &Sandbox, action: Action, approved: Option<&Approval>, chunks: Option<mpsc::Sender<Chunk>>) -> Result<Governed, ApiError> {
    let workspace = PathBuf::from(&sb.workspace);
    same_workspace(sb)?;
    // Canonical paths first: one that leaves the workspace is refused before anything else.
    let action = match action {
        Action::Read { path } => Action::Read { path: rel_string(&workspace, &path)? },
        Action::Write { path, bytes } => Action::Write { path: rel_string(&workspace, &path)?, bytes },
        Action::Delete { path } => Action::Delete { path: rel_string(&workspace, &path)? },
        Action::List { path } => Action::List { path: if path.is_empty() || path == "." { String::new() } else { rel_string(&workspace, &path)? } },
        Action::Exec { text, stdin, timeout_s } => {
            if text.trim().is_empty() {
                return Err(ApiError::BadRequest("the command is empty".into()));
            }
            if text.contains('\0') {
                return Err(ApiError::BadRequest("the command holds a NUL byte".into()));
            }
            Action::Exec { text, stdin, timeout_s: timeout_s.clamp(1, app.opts.max_timeout_s) }
        }
    };
    let canonical = action.canonical(sb);
    let hash = action_hash(&canonical);
    if let Some(a) = approved
        && a.action_hash != hash
    {
        return Err(ApiError::Conflict("the action differs from the one that was approved".into()));
    }
    let app2 = app.clone_handle();
    let sb2 = sb.clone();
    let action2 = action.clone();
    // Judging reads the file system (policy files, the project's git directory): off the
    // async threads.
    let judged = tokio::task::spawn_blocking(move || judge(&app2, &sb2, &action2))
        .await
        .map_err(ApiError::internal)??;
    let Judged { policy, verdict, reason, preset } = judged;
    let recorder = recorder(app, &policy)?;
    let session = format!("serve:{}", sb.id);
    let recorder = recorder.session(Some(session.clone()));
    let mut intent = json!({
        "actor": actor.name,
        "role": actor.role.as_str(),
        "action": redact_stdin(&canonical),
        "action_hash": hash,
        "decision": verdict,
        "reason": reason,
    });
    if let Some(a) = approved {
        intent["approval"] = a.id.clone().into();
        intent["approved_by"] = a.decided_by.clone().into();
    }
    record(&recorder, "serve_call", intent)?;
    let outcome = |o: Value| record(&recorder, "serve_result", json!({"actor": actor.name, "action_hash": hash, "outcome": o}));
    match verdict {
        Verdict::Deny => {
            outcome(json!({"denied": reason}))?;
            return Err(ApiError::Denied(reason));
        }
        Verdict::Ask if approved.is_none() => {
            let a = new_approval(app, actor, sb, canonical, hash.clone(), reason)?;
            outcome(json!({"approval": a.id}))?;
            return Ok(Governed::Pending(a));
        }
        _ => {}
    }
    let result = perform(app, sb, &workspace, action, preset, approved.is_some(), session, chunks).await;
    match &result {
        Ok(Governed::Ran { output, .. }) => outcome(json!({"exit_code": output.exit_code, "duration_ms": output.duration_ms, "truncated": output.truncated, "timed_out": output.timed_out}))?,
        Ok(Governed::Bytes(b)) => outcome(json!({"read": b.len()}))?,
        Ok(Governed::Entries(e)) => outcome(json!({"entries": e.len()}))?,
        Ok(_) => outcome(json!("done"))?,
        Err(e) => outcome(json!({"error": e.code()}))?,
    }
    result
}

/// The directory at the sandbox's workspace path is still the one it was made with: not a link
/// to elsewhere, not another directory moved there (by a sandbox around it, say).
fn same_workspace(sb: &Sandbox) -> Result<(), ApiError> {
    let changed = || ApiError::Conflict(format!("the sandbox's workspace `{}` was replaced since the sandbox was made; delete the sandbox", sb.workspace));
    let path = Path::new(&sb.workspace);
    if std::fs::canonicalize(path).ok().as_deref() != Some(path) {
        return Err(changed());
    }
    let m = std::fs::metadata(path).map_err(|_| changed())?;
    use std::os::unix::fs::MetadataExt;
    if let (Some(dev), Some(ino)) = (sb.dev, sb.ino)
        && (m.dev() as i64 != dev || m.ino() as i64 != ino)
    {
        return Err(changed());
    }
    Ok(())
}

fn rel_string(workspace: &Path, p: &str) -> Result<String, ApiError> {
    let r = paths::relative(workspace, p)?;
    if r.as_os_str().is_empty() {
        return Err(ApiError::BadPath(format!("`{p}` is the workspace itself, not a file in it")));
    }
    // Where the kernel would take it now, links followed: a link that points out is named
    // for what it is. (The open itself is what holds: it resolves beneath the workspace.)
    let (_, physical) = pinfold_plan::files::resolve(workspace, &r.to_string_lossy(), None);
    if !physical.starts_with(workspace) {
        return Err(ApiError::BadPath(format!("`{p}` leads outside the sandbox's workspace (through a symbolic link)")));
    }
    r.to_str().map(str::to_string).ok_or_else(|| ApiError::BadPath("the path is not UTF-8".into()))
}

/// The stdin of an exec is recorded by size and hash, not content.
fn redact_stdin(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(s) = v.get("stdin").and_then(Value::as_str) {
        v["stdin"] = json!({"bytes": s.len(), "sha256": hex(&Sha256::digest(s.as_bytes()))});
    }
    v
}

struct Judged {
    policy: Policy,
    verdict: Verdict,
    reason: String,
    /// The preset the command runs in (named to `pinfold exec` when a person approved it).
    preset: Option<String>,
}

fn judge(app: &App, sb: &Sandbox, action: &Action) -> Result<Judged, ApiError> {
    let workspace = PathBuf::from(&sb.workspace);
    let policy = load_policy(app, sb, &workspace)?;
    let dirs = &app.dirs;
    let (verdict, reason, preset) = match action {
        Action::Exec { text, .. } => {
            // The verdict as `pinfold exec` reaches it (pinfold_plan::judge, the first step of
            // its plan); the child `pinfold exec` plans the sandbox itself.
            let cx = Context {
                cwd: workspace.clone(),
                sandbox: sb.preset.clone(),
                backend: sb.backend.as_deref().and_then(|b| b.parse().ok()),
                ..Context::default()
            };
            let j = pinfold_plan::judge(std::slice::from_ref(text), &cx, &policy).judgement;
            let mut reason = j.reason.clone();
            if let Some(m) = j.commands.iter().find(|c| c.decision == j.decision).and_then(|c| c.message.clone()) {
                if !reason.contains(&m) {
                    reason = format!("{reason} ({m})");
                }
            }
            // The preset it runs in: named to `pinfold exec` when a person approved an ask.
            let preset = match j.decision {
                Verdict::Deny => None,
                _ => Some(pinfold_plan::preset(&j, sb.preset.as_deref(), policy.config()).map_err(|e| ApiError::BadRequest(format!("{e}; {}", e.hint())))?.name),
            };
            (j.decision, reason, preset)
        }
        Action::Read { path } | Action::List { path } => {
            let preset = file_preset(&policy, sb)?;
            let below = matches!(action, Action::List { .. });
            let p = if path.is_empty() { ".".to_string() } else { path.clone() };
            match read_check_in(preset, &workspace, &p, below, dirs) {
                Some(why) => (Verdict::Deny, why, None),
                None => (Verdict::Allow, format!("the `{}` sandbox may read it", preset.name), None),
            }
        }
        Action::Write { path, .. } | Action::Delete { path } => {
            let preset = file_preset(&policy, sb)?;
            match write_check_in(policy.config(), preset, &workspace, path, dirs) {
                Some(why) => (Verdict::Deny, why, None),
                None => (Verdict::Allow, format!("the `{}` sandbox may write it", preset.name), None),
            }
        }
    };
    Ok(Judged { policy, verdict, reason, preset })
}

fn new_approval(app: &App, actor: &Actor, sb: &Sandbox, action: Value, hash: String, reason: String) -> Result<Approval, ApiError> {
    let now = db::now();
    let a = Approval {
        id: format!("ap_{}", crate::random_hex(12)),
        sandbox: sb.id.clone(),
        status: "pending".into(),
        action,
        action_hash: hash,
        reason,
        requested_by: actor.name.clone(),
        decided_by: None,
        decision_reason: None,
        result: None,
        created_at: now,
        expires_at: now + app.opts.approval_ttl_s as i64,
        decided_at: None,
    };
    db::insert_approval(&app.db(), &a)?;
    app.approvals_changed();
    Ok(a)
}

#[allow(clippy::too_many_arguments)]
async fn perform(app: &App, sb: &Sandbox, workspace: &Path, action: Action, preset: Option<String>, approved: bool, session: String, chunks: Option<mpsc::Sender<Chunk>>) -> Result<Governed, ApiError> {
    let root = || Root::open(workspace).map_err(|e| ApiError::Conflict(format!("the sandbox's workspace cannot be opened: {e}")));
    match action {
        Action::Exec { text, stdin, timeout_s } => {
            let token = if approved {
                let key = pinfold_plan::token::load_or_create_key(&app.dirs).map_err(ApiError::internal)?;
                let p = preset.clone().ok_or_else(|| ApiError::internal("an approved run without a preset"))?;
                Some(pinfold_plan::token::mint(&key, &text, &p, workspace, pinfold_plan::token::now()))
            } else {
                None
            };
            let spec = run::Spec {
                exe: app.exe.clone(),
                workspace: workspace.to_path_buf(),
                // An approved ask runs in the preset the person saw; an allowed command where
                // the policy puts it.
                preset: if approved { preset } else { sb.preset.clone() },
                backend: sb.backend.clone(),
                keep: Some(sb.id.clone()),
                text,
                stdin: stdin.map(String::into_bytes),
                timeout: Duration::from_secs(timeout_s),
                cap: app.opts.output_cap,
                approved: token,
                session,
                cache: app.dirs_for(&sb.id).cache,
            };
            let id = sb.id.clone();
            let mut pid_seen = 0;
            let out = run::run(
                spec,
                |pid| {
                    pid_seen = pid;
                    app.running_add(&id, pid);
                },
                chunks,
            )
            .await;
            app.running_remove(&sb.id, pid_seen);
            let _ = db::touch_sandbox(&app.db(), &sb.id);
            let output = out.map_err(|e| ApiError::internal(format!("cannot start pinfold exec: {e}")))?;
            Ok(Governed::Ran { output, verdict: if approved { Verdict::Ask } else { Verdict::Allow } })
        }
        Action::Read { path } => {
            let f = root()?.read(Path::new(&path)).map_err(|e| paths::io_error(&path, e))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if len > app.opts.max_file as u64 {
                return Err(ApiError::TooLarge(app.opts.max_file));
            }
            let mut bytes = Vec::with_capacity(len as usize);
            use std::io::Read;
            f.take(app.opts.max_file as u64 + 1).read_to_end(&mut bytes).map_err(|e| paths::io_error(&path, e))?;
            if bytes.len() > app.opts.max_file {
                return Err(ApiError::TooLarge(app.opts.max_file));
            }
            Ok(Governed::Bytes(bytes))
        }
        Action::Write { path, bytes } => {
            root()?.write(Path::new(&path), &bytes).map_err(|e| paths::io_error(&path, e))?;
            let _ = db::touch_sandbox(&app.db(), &sb.id);
            Ok(Governed::Done)
        }
        Action::Delete { path } => {
            root()?.remove(Path::new(&path)).map_err(|e| paths::io_error(&path, e))?;
            let _ = db::touch_sandbox(&app.db(), &sb.id);
            Ok(Governed::Done)
        }
        Action::List { path } => {
            let d = root()?.dir(Path::new(&path)).map_err(|e| paths::io_error(&path, e))?;
            Ok(Governed::Entries(paths::list(d).map_err(|e| paths::io_error(&path, e))?))
        }
    }
}

/// Run an approval a person approved: the stored action, checked against its hash, through
/// [`govern`]; the result goes on the approval (status `consumed`).
pub async fn run_approved(app: &App, a: Approval) {
    let result = match replay(app, &a).await {
        Ok(v) => v,
        Err(e) => json!({"error": e.body()["error"].clone()}),
    };
    if let Err(e) = db::set_result(&app.db(), &a.id, &result) {
        crate::log(&format!("cannot store the result of {}: {e}", a.id));
    }
    app.approvals_changed();
}

async fn replay(app: &App, a: &Approval) -> Result<Value, ApiError> {
    if action_hash(&a.action) != a.action_hash {
        return Err(ApiError::Conflict("the stored action does not match the hash that was approved".into()));
    }
    let sb = db::sandbox(&app.db(), &a.sandbox)?.ok_or_else(|| ApiError::NotFound("the approval's sandbox no longer exists".into()))?;
    // The action runs where it was asked for: the same sandbox, workspace and preset.
    if a.action["workspace"] != json!(sb.workspace) || a.action["preset"] != json!(sb.preset) {
        return Err(ApiError::Conflict("the sandbox changed since the approval was asked for".into()));
    }
    let text = a.action["command"].as_str().ok_or_else(|| ApiError::internal("an approval without a command"))?.to_string();
    let stdin = a.action["stdin"].as_str().map(str::to_string);
    let timeout_s = a.action["timeout_s"].as_u64().unwrap_or(app.opts.default_timeout_s);
    let actor = Actor { name: a.requested_by.clone(), role: db::Role::Agent };
    match govern(app, &actor, &sb, Action::Exec { text, stdin, timeout_s }, Some(a), None).await? {
        Governed::Ran { output, verdict } => Ok(crate::api::exec_body(&output, verdict)),
        _ => Err(ApiError::internal("an approved exec that did not run")),
    }
}
