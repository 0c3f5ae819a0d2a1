//! The REST API: routes, request bodies, responses. Each handler checks who may do what, then
//! hands governed work to [`govern::govern`]. Errors are `{"error": {"code", "message"}}`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path as UrlPath, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use pinfold_plan::record::Recorder;
use pinfold_policy::config::{Action as Verdict, Audit};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::db::{self, Actor, Approval, Role, Sandbox};
use crate::error::ApiError;
use crate::govern::{self, Action, Governed};
use crate::run::{Chunk, Output};
use crate::App;

pub fn router(app: App) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/sandboxes", post(create_sandbox).get(list_sandboxes))
        .route("/v1/sandboxes/{id}", get(get_sandbox).delete(delete_sandbox))
        .route("/v1/sandboxes/{id}/exec", post(exec))
        .route("/v1/sandboxes/{id}/files", get(read_file).put(write_file).delete(delete_file))
        .route("/v1/sandboxes/{id}/dir", get(list_dir))
        .route("/v1/approvals", get(list_approvals))
        .route("/v1/approvals/{id}", get(get_approval))
        .route("/v1/approvals/{id}/approve", post(approve))
        .route("/v1/approvals/{id}/deny", post(deny))
        .route("/v1/ledger", get(ledger))
        .route("/v1/ledger/verify", get(ledger_verify))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::guard::checks))
        .with_state(app)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint".into())
}

async fn method_not_allowed() -> Response {
    let e = json!({"error": {"code": "method_not_allowed", "message": "this endpoint does not take that method"}});
    (StatusCode::METHOD_NOT_ALLOWED, Json(e)).into_response()
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

// --- who is asking ---

impl FromRequestParts<App> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Actor, ApiError> {
        let token = bearer(&parts.headers).ok_or(ApiError::Unauthorized)?;
        let hash = crate::token_hash(token);
        // Per token, before the database is asked: a flood with one token stops here.
        if !app.limiter.allow(&format!("t:{hash}")) {
            return Err(ApiError::RateLimited);
        }
        db::actor_by_hash(&app.db(), &hash)?.ok_or(ApiError::Unauthorized)
    }
}

/// The bearer token: `Authorization: Bearer T`, else the dashboard's cookie.
fn bearer(h: &HeaderMap) -> Option<&str> {
    if let Some(v) = h.get("authorization") {
        let v = v.to_str().ok()?;
        let (scheme, t) = v.split_once(' ')?;
        return (scheme.eq_ignore_ascii_case("bearer") && !t.trim().is_empty()).then_some(t.trim());
    }
    None
}

fn operator(a: &Actor) -> Result<(), ApiError> {
    match a.role {
        Role::Operator => Ok(()),
        Role::Agent => Err(ApiError::Forbidden("only an operator token may do this".into())),
    }
}

// --- bodies ---

async fn read_bytes(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    let limited = http_body_util::Limited::new(body, limit);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes().to_vec()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::TooLarge(limit)),
        Err(_) => Err(ApiError::BadRequest("the request body could not be read".into())),
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(body: Body, limit: usize, empty_ok: bool) -> Result<T, ApiError> {
    let bytes = read_bytes(body, limit).await?;
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) && empty_ok { b"{}" } else { &bytes };
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest(format!("the body is not the JSON this endpoint takes: {e}")))
}

fn query<T>(q: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t).map_err(|e| ApiError::BadRequest(format!("bad query: {}", e.body_text())))
}

// --- sandboxes ---

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateSandbox {
    workspace: Option<String>,
    preset: Option<String>,
    ttl_s: Option<u64>,
}

/// The most a sandbox may live.
const MAX_TTL_S: u64 = 7 * 24 * 3600;

fn sandbox_view(s: &Sandbox) -> Value {
    json!({
        "id": s.id,
        "workspace": s.workspace,
        "preset": s.preset,
        "owner": s.owner,
        "created_at": s.created_at,
        "expires_at": s.expires_at,
        "last_used": s.last_used,
    })
}

/// The server's own records (sandboxes made and removed, decisions): recorded whatever a
/// project's policy says.
fn server_recorder(app: &App) -> Result<Recorder, ApiError> {
    Recorder::open(&Audit { enabled: true, redact_env: Vec::new() }, &app.dirs).map_err(|e| {
        crate::log(&format!("ledger: {e}"));
        ApiError::Unrecorded
    })
}

fn record(app: &App, kind: &str, data: Value) -> Result<(), ApiError> {
    server_recorder(app)?.record(kind, data).map(drop).map_err(|e| {
        crate::log(&format!("ledger: {e}"));
        ApiError::Unrecorded
    })
}

async fn create_sandbox(State(app): State<App>, actor: Actor, body: Body) -> Result<Response, ApiError> {
    let req: CreateSandbox = read_json(body, app.opts.max_body, true).await?;
    let id = format!("sb_{}", crate::random_hex(12));
    let ttl = req.ttl_s.unwrap_or(app.opts.sandbox_ttl_s);
    if ttl == 0 || ttl > MAX_TTL_S {
        return Err(ApiError::BadRequest(format!("ttl_s must be between 1 and {MAX_TTL_S}")));
    }
    let (workspace, fresh) = match &req.workspace {
        Some(w) => {
            let c = crate::canonical_dir(Path::new(w)).map_err(|e| ApiError::BadPath(format!("the workspace `{w}` is not an existing directory: {e}")))?;
            if !app.opts.workspace_roots.iter().any(|r| c.starts_with(r)) {
                return Err(ApiError::Forbidden(format!(
                    "the workspace `{}` is not beneath a directory this server lets sandboxes use (pinfold serve --workspace-root DIR)",
                    c.display()
                )));
            }
            (c, false)
        }
        None => {
            let d = app.opts.workspaces.join(&id);
            std::fs::create_dir(&d).map_err(|e| ApiError::internal(format!("cannot create {}: {e}", d.display())))?;
            (crate::canonical_dir(&d).map_err(ApiError::internal)?, true)
        }
    };
    let cleanup = |e: ApiError| {
        if fresh {
            let _ = std::fs::remove_dir_all(&workspace);
        }
        e
    };
    if let Some(p) = &req.preset {
        let policy = pinfold_plan::load::policy(None, Some(&workspace), true, &app.dirs).map_err(|e| cleanup(ApiError::Policy(e.to_string())))?;
        if !policy.config().sandboxes.contains_key(p) {
            let known: Vec<&String> = policy.config().sandboxes.keys().collect();
            return Err(cleanup(ApiError::BadRequest(format!("no sandbox preset named `{p}`; the policy defines: {}", known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")))));
        }
    }
    let now = db::now();
    let sb = Sandbox {
        id,
        workspace: workspace.display().to_string(),
        preset: req.preset,
        owner: actor.name.clone(),
        fresh,
        created_at: now,
        expires_at: now + ttl as i64,
        idle_s: app.opts.sandbox_idle_s as i64,
        last_used: now,
    };
    record(&app, "serve_sandbox", json!({"event": "created", "actor": actor.name, "sandbox": sb.id, "workspace": sb.workspace, "preset": sb.preset, "expires_at": sb.expires_at}))
        .map_err(cleanup)?;
    db::insert_sandbox(&app.db(), &sb).map_err(|e| cleanup(e.into()))?;
    Ok((StatusCode::CREATED, Json(sandbox_view(&sb))).into_response())
}

/// The sandbox `id` as `actor` may see it: an agent sees its own only.
fn visible_sandbox(app: &App, actor: &Actor, id: &str) -> Result<Sandbox, ApiError> {
    let sb = db::sandbox(&app.db(), id)?;
    match sb {
        Some(s) if actor.role == Role::Operator || s.owner == actor.name => Ok(s),
        _ => Err(ApiError::NotFound(format!("no sandbox `{id}`"))),
    }
}

async fn list_sandboxes(State(app): State<App>, actor: Actor) -> Result<Json<Value>, ApiError> {
    let owner = (actor.role == Role::Agent).then_some(actor.name.as_str());
    let list = db::sandboxes(&app.db(), owner)?;
    Ok(Json(json!({"sandboxes": list.iter().map(sandbox_view).collect::<Vec<_>>()})))
}

async fn get_sandbox(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>) -> Result<Json<Value>, ApiError> {
    Ok(Json(sandbox_view(&visible_sandbox(&app, &actor, &id)?)))
}

async fn delete_sandbox(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>) -> Result<StatusCode, ApiError> {
    let sb = visible_sandbox(&app, &actor, &id)?;
    remove_sandbox(&app, &sb, &actor.name, "deleted")?;
    Ok(StatusCode::NO_CONTENT)
}

/// Kill what runs in `sb`, forget it, and remove its workspace if the server made it.
pub fn remove_sandbox(app: &App, sb: &Sandbox, by: &str, event: &str) -> Result<(), ApiError> {
    record(app, "serve_sandbox", json!({"event": event, "actor": by, "sandbox": sb.id}))?;
    // The row first, then the runs (see App::running_add).
    db::delete_sandbox(&app.db(), &sb.id)?;
    app.kill_sandbox(&sb.id);
    if sb.fresh {
        let ws = PathBuf::from(&sb.workspace);
        // Only ever a directory the server made, directly in its workspaces directory.
        if ws.parent() == crate::canonical_dir(&app.opts.workspaces).ok().as_deref() {
            let ws2 = ws.clone();
            std::thread::spawn(move || {
                // What still runs there is being killed; give it a moment.
                std::thread::sleep(Duration::from_millis(100));
                let _ = std::fs::remove_dir_all(ws2);
            });
        }
    }
    Ok(())
}

// --- exec ---

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecRequest {
    command: Option<String>,
    argv: Option<Vec<String>>,
    timeout_s: Option<u64>,
    stdin: Option<String>,
}

pub fn exec_body(o: &Output, verdict: Verdict) -> Value {
    json!({
        "exit_code": o.exit_code,
        "stdout": o.stdout,
        "stderr": o.stderr,
        "truncated": o.truncated,
        "output_limit": o.output_limit,
        "timed_out": o.timed_out,
        "duration_ms": o.duration_ms,
        "verdict": verdict,
    })
}

fn approval_url(app: &App, id: &str) -> String {
    let host = app.hosts.lock().unwrap_or_else(|p| p.into_inner()).first().cloned().unwrap_or_default();
    format!("http://{host}/v1/approvals/{id}")
}

fn pending_body(app: &App, a: &Approval) -> Value {
    json!({"approval": {"id": a.id, "status": a.status, "url": approval_url(app, &a.id), "reason": a.reason, "expires_at": a.expires_at}})
}

async fn exec(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.opts.max_body).await?;
    let req: ExecRequest = serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("the body is not the JSON this endpoint takes: {e}")))?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    let text = match (req.command, req.argv) {
        (Some(c), None) => c,
        (None, Some(argv)) if !argv.is_empty() => pinfold_shell::join(&argv),
        _ => return Err(ApiError::BadRequest("give exactly one of `command` (shell text) or `argv` (a non-empty list)".into())),
    };
    let action = Action::Exec { text, stdin: req.stdin, timeout_s: req.timeout_s.unwrap_or(app.opts.default_timeout_s) };
    let stream = headers.get("accept").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/event-stream"));
    if stream {
        return Ok(crate::guard::stream_exec(app, actor, sb, action).await);
    }
    // Idempotency-Key: the same key and body get the first answer again, and run nothing.
    let key = headers.get("idempotency-key").map(|v| v.to_str().map(str::to_string)).transpose().map_err(|_| ApiError::BadRequest("Idempotency-Key is not text".into()))?;
    let request_hash = govern::hex(&<sha2::Sha256 as sha2::Digest>::digest([id.as_bytes(), b"\0", &bytes].concat()));
    if let Some(k) = &key {
        if k.is_empty() || k.len() > 200 {
            return Err(ApiError::BadRequest("Idempotency-Key must be 1-200 characters".into()));
        }
        if let Some((h, status, body)) = db::idempotent(&app.db(), &actor.name, k)? {
            if h != request_hash {
                return Err(ApiError::Conflict("this Idempotency-Key was used for a different request".into()));
            }
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let mut r = (status, body).into_response();
            r.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            r.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            return Ok(r);
        }
    }
    let (status, body) = match govern::govern(&app, &actor, &sb, action, None, None).await {
        Ok(Governed::Ran { output, verdict }) => (StatusCode::OK, exec_body(&output, verdict)),
        Ok(Governed::Pending(a)) => (StatusCode::ACCEPTED, pending_body(&app, &a)),
        Ok(_) => return Err(ApiError::internal("exec gave no run")),
        Err(e @ (ApiError::Denied(_) | ApiError::BadRequest(_))) => (e.status(), e.body()),
        Err(e) => return Err(e),
    };
    if let Some(k) = &key {
        db::keep_idempotent(&app.db(), &actor.name, k, &request_hash, status.as_u16(), &body.to_string())?;
    }
    Ok((status, Json(body)).into_response())
}

/// A governed exec's result as one server-sent-events stream's last event.
pub async fn exec_stream_result(app: &App, actor: &Actor, sb: &Sandbox, action: Action, chunks: tokio::sync::mpsc::Sender<Chunk>) -> (String, Value) {
    match govern::govern(app, actor, sb, action, None, Some(chunks)).await {
        Ok(Governed::Ran { output, verdict }) => ("result".into(), exec_body(&output, verdict)),
        Ok(Governed::Pending(a)) => ("approval".into(), pending_body(app, &a)),
        Ok(_) => ("error".into(), ApiError::internal("exec gave no run").body()),
        Err(e) => ("error".into(), e.body()),
    }
}

// --- files ---

#[derive(Deserialize)]
struct PathQuery {
    path: Option<String>,
}

fn need_path(q: PathQuery) -> Result<String, ApiError> {
    q.path.filter(|p| !p.is_empty()).ok_or_else(|| ApiError::BadRequest("give the file as ?path=P".into()))
}

async fn read_file(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>) -> Result<Response, ApiError> {
    let path = need_path(query(q)?)?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    match govern::govern(&app, &actor, &sb, Action::Read { path }, None, None).await? {
        Governed::Bytes(b) => {
            let mut r = b.into_response();
            r.headers_mut().insert("content-type", HeaderValue::from_static("application/octet-stream"));
            Ok(r)
        }
        _ => Err(ApiError::internal("read gave no bytes")),
    }
}

async fn write_file(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>, body: Body) -> Result<Json<Value>, ApiError> {
    let path = need_path(query(q)?)?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    let bytes = read_bytes(body, app.opts.max_file).await?;
    let n = bytes.len();
    govern::govern(&app, &actor, &sb, Action::Write { path: path.clone(), bytes }, None, None).await?;
    Ok(Json(json!({"path": path, "bytes": n})))
}

async fn delete_file(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>) -> Result<StatusCode, ApiError> {
    let path = need_path(query(q)?)?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    govern::govern(&app, &actor, &sb, Action::Delete { path }, None, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_dir(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>) -> Result<Json<Value>, ApiError> {
    let path = query(q)?.path.unwrap_or_default();
    let sb = visible_sandbox(&app, &actor, &id)?;
    match govern::govern(&app, &actor, &sb, Action::List { path }, None, None).await? {
        Governed::Entries(e) => Ok(Json(json!({"entries": e.iter().map(|(n, t, s)| json!({"name": n, "type": t, "size": s})).collect::<Vec<_>>()}))),
        _ => Err(ApiError::internal("list gave no entries")),
    }
}

// --- approvals ---

pub fn approval_view(app: &App, a: &Approval) -> Value {
    json!({
        "id": a.id,
        "status": a.status,
        "action": a.action,
        "action_hash": a.action_hash,
        "reason": a.reason,
        "sandbox": a.sandbox,
        "requested_by": a.requested_by,
        "decided_by": a.decided_by,
        "decision_reason": a.decision_reason,
        "result": a.result,
        "created_at": a.created_at,
        "expires_at": a.expires_at,
        "decided_at": a.decided_at,
        "url": approval_url(app, &a.id),
    })
}

#[derive(Deserialize)]
struct ListApprovals {
    status: Option<String>,
    limit: Option<i64>,
}

const STATUSES: &[&str] = &["pending", "approved", "denied", "expired", "consumed"];

async fn list_approvals(State(app): State<App>, actor: Actor, q: Result<Query<ListApprovals>, axum::extract::rejection::QueryRejection>) -> Result<Json<Value>, ApiError> {
    let q = query(q)?;
    if let Some(s) = &q.status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::BadRequest(format!("unknown status `{s}`; use one of {}", STATUSES.join(", "))));
    }
    let by = (actor.role == Role::Agent).then_some(actor.name.as_str());
    let list = db::approvals(&app.db(), q.status.as_deref(), by, q.limit.unwrap_or(100).clamp(1, 1000))?;
    Ok(Json(json!({"approvals": list.iter().map(|a| approval_view(&app, a)).collect::<Vec<_>>()})))
}

fn visible_approval(app: &App, actor: &Actor, id: &str) -> Result<Approval, ApiError> {
    match db::approval(&app.db(), id)? {
        Some(a) if actor.role == Role::Operator || a.requested_by == actor.name => Ok(a),
        _ => Err(ApiError::NotFound(format!("no approval `{id}`"))),
    }
}

#[derive(Deserialize)]
struct Wait {
    wait: Option<u64>,
}

/// The longest a long poll waits.
const MAX_WAIT_S: u64 = 60;

async fn get_approval(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<Wait>, axum::extract::rejection::QueryRejection>) -> Result<Json<Value>, ApiError> {
    let wait = Duration::from_secs(query(q)?.wait.unwrap_or(0).min(MAX_WAIT_S));
    let deadline = tokio::time::Instant::now() + wait;
    let mut changes = app.approvals_watch();
    loop {
        let a = visible_approval(&app, &actor, &id)?;
        // Waiting ends when the approval reaches a state nobody acts on any more.
        if !matches!(a.status.as_str(), "pending" | "approved") || tokio::time::Instant::now() >= deadline {
            return Ok(Json(approval_view(&app, &a)));
        }
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            let a = visible_approval(&app, &actor, &id)?;
            return Ok(Json(approval_view(&app, &a)));
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Decision {
    reason: Option<String>,
}

async fn approve(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, body: Body) -> Result<Json<Value>, ApiError> {
    let d: Decision = read_json(body, app.opts.max_body, true).await?;
    let a = decide(&app, &actor, &id, "approved", d.reason)?;
    // The action runs once, in its sandbox; its result lands on the approval.
    let app2 = app.clone();
    let a2 = a.clone();
    tokio::spawn(async move { govern::run_approved(&app2, a2).await });
    Ok(Json(approval_view(&app, &a)))
}

async fn deny(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, body: Body) -> Result<Json<Value>, ApiError> {
    let d: Decision = read_json(body, app.opts.max_body, true).await?;
    let a = decide(&app, &actor, &id, "denied", d.reason)?;
    Ok(Json(approval_view(&app, &a)))
}

/// An operator's decision on a pending approval that is not their own.
pub fn decide(app: &App, actor: &Actor, id: &str, to: &str, reason: Option<String>) -> Result<Approval, ApiError> {
    operator(actor)?;
    let a = db::approval(&app.db(), id)?.ok_or_else(|| ApiError::NotFound(format!("no approval `{id}`")))?;
    if a.requested_by == actor.name {
        return Err(ApiError::SelfApproval);
    }
    if a.status != "pending" {
        return Err(ApiError::Conflict(format!("the approval is {}, not pending", a.status)));
    }
    if a.expires_at <= db::now() {
        expire(app, &a.id);
        return Err(ApiError::Conflict("the approval expired".into()));
    }
    if reason.as_ref().is_some_and(|r| r.len() > 4096) {
        return Err(ApiError::BadRequest("the reason is longer than 4096 bytes".into()));
    }
    record(app, "approval", json!({"approval": a.id, "decision": to, "by": actor.name, "requested_by": a.requested_by, "action_hash": a.action_hash, "reason": reason}))?;
    if !db::decide(&app.db(), id, "pending", to, Some(&actor.name), reason.as_deref())? {
        return Err(ApiError::Conflict("the approval was decided by someone else first".into()));
    }
    app.approvals_changed();
    db::approval(&app.db(), id)?.ok_or_else(|| ApiError::internal("a decided approval vanished"))
}

fn expire(app: &App, id: &str) {
    let recorded = record(app, "approval", json!({"approval": id, "decision": "expired"}));
    if recorded.is_ok() && db::decide(&app.db(), id, "pending", "expired", None, None).unwrap_or(false) {
        app.approvals_changed();
    }
}

// --- the ledger ---

#[derive(Deserialize)]
struct LedgerQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

async fn ledger(State(app): State<App>, actor: Actor, q: Result<Query<LedgerQuery>, axum::extract::rejection::QueryRejection>) -> Result<Json<Value>, ApiError> {
    operator(&actor)?;
    let q = query(q)?;
    let dir = app.dirs.ledger_dir().map_err(ApiError::internal)?.to_path_buf();
    let after = q.after;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let records = tokio::task::spawn_blocking(move || pinfold_ledger::read_records(&dir)).await.map_err(ApiError::internal)?.map_err(ApiError::internal)?;
    let page: Vec<Value> = records.into_iter().filter(|r| r["seq"].as_u64().is_some_and(|s| after.is_none_or(|a| s > a))).take(limit).collect();
    let next = page.last().and_then(|r| r["seq"].as_u64());
    Ok(Json(json!({"records": page, "next_after": next})))
}

async fn ledger_verify(State(app): State<App>, actor: Actor) -> Result<Json<Value>, ApiError> {
    operator(&actor)?;
    let dir = app.dirs.ledger_dir().map_err(ApiError::internal)?.to_path_buf();
    let r = tokio::task::spawn_blocking(move || pinfold_ledger::verify(&dir)).await.map_err(ApiError::internal)?.map_err(ApiError::internal)?;
    let status = match r.status() {
        pinfold_ledger::Status::Intact => "intact",
        pinfold_ledger::Status::Torn => "torn",
        pinfold_ledger::Status::Tampered => "tampered",
    };
    Ok(Json(json!({"status": status, "records": r.records, "checkpoints": r.checkpoints, "head": r.head, "problem": r.problem.map(|p| format!("{p:?}"))})))
}

// --- start-up and housekeeping ---

/// After a restart: an approval that was running when the server stopped is closed with that
/// fact (it is never run twice); a fresh workspace that is gone takes its sandbox with it.
pub fn reconcile(app: &App) {
    let interrupted = db::approvals(&app.db(), Some("approved"), None, i64::MAX).unwrap_or_default();
    for a in interrupted {
        let r = json!({"error": {"code": "interrupted", "message": "the server stopped while this action ran; it is not run again"}});
        let _ = record(app, "approval", json!({"approval": a.id, "decision": "interrupted"}));
        let _ = db::set_result(&app.db(), &a.id, &r);
    }
    for sb in db::sandboxes(&app.db(), None).unwrap_or_default() {
        if !Path::new(&sb.workspace).is_dir() {
            let _ = remove_sandbox(app, &sb, "server", "workspace_gone");
        }
    }
}

/// Once a second: expire approvals past their time, remove sandboxes past their TTL or idle.
pub async fn reaper(app: App) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let now = db::now();
        let expired = db::expired_pending(&app.db(), now).unwrap_or_default();
        for id in expired {
            expire(&app, &id);
        }
        let stale = db::stale_sandboxes(&app.db(), now).unwrap_or_default();
        for sb in stale {
            let busy = app.running.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&sb.id);
            // Idle means nothing running; a TTL ends the sandbox whatever runs.
            if sb.expires_at <= now || !busy {
                let event = if sb.expires_at <= now { "expired" } else { "idle" };
                let _ = remove_sandbox(&app, &sb, "server", event);
            }
        }
    }
}
