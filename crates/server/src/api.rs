//! The REST API: routes, request bodies, responses. Each handler checks who may do what, then
//! hands governed work to [`govern::govern`]. Errors are `{"error": {"code", "message"}}`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use pinfold_plan::record::Recorder;
use pinfold_policy::config::{Action as Verdict, Audit};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::db::{self, Actor, Approval, Role, Sandbox};
use crate::error::{ApiError, ErrorBody};
use crate::govern::{self, Action, Governed};
use crate::run::{Chunk, Output};
use crate::App;

pub fn router(app: App) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/openapi.json", get(openapi_json))
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
        .route_service("/mcp", crate::mcp::service(app.clone()))
        .merge(crate::dashboard::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::guard::checks))
        .with_state(app)
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint".into())
}

async fn method_not_allowed() -> Response {
    let e = ErrorBody::new("method_not_allowed", "this endpoint does not take that method");
    (StatusCode::METHOD_NOT_ALLOWED, Json(e)).into_response()
}

/// `GET /healthz`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok`.
    #[schema(example = "ok")]
    pub status: String,
}

/// Whether the server is up. Needs no token.
#[utoipa::path(get, path = "/healthz", tag = "server",
    responses(
        (status = 200, description = "The server is up", body = Health),
        (status = 403, description = "bad_host: the Host header names a host this server does not answer for", body = ErrorBody),
        (status = 429, description = "rate_limited: too many requests from this address", body = ErrorBody)
    )
)]
async fn healthz() -> Json<Health> {
    Json(Health { status: "ok".into() })
}

// --- the OpenAPI document ---

/// The OpenAPI document of this API, made from the handlers' annotations and the types the
/// handlers answer with, so the document and the answers are the same code.
#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "pinfold serve", description = "A governed sandbox server: every command and file call is judged by the policy, may wait for a person's approval, runs in a sandbox and is recorded in the audit ledger. See docs/server.md."),
    paths(
        healthz, openapi_json,
        create_sandbox, list_sandboxes, get_sandbox, delete_sandbox,
        exec,
        read_file, write_file, delete_file, list_dir,
        list_approvals, get_approval, approve, deny,
        ledger, ledger_verify
    ),
    components(schemas(ErrorBody)),
    modifiers(&BearerAuth),
    tags(
        (name = "server", description = "Health and this document: no token needed"),
        (name = "sandboxes", description = "Sandboxes: a workspace and the preset its commands run in"),
        (name = "exec", description = "Governed commands"),
        (name = "files", description = "Governed file calls beneath a sandbox's workspace"),
        (name = "approvals", description = "Requests the policy put to a person"),
        (name = "ledger", description = "The audit ledger (operators only)")
    )
)]
pub struct ApiDoc;

/// The `bearer` security scheme every operation but /healthz and /v1/openapi.json names, and
/// what the annotations cannot say.
#[derive(Debug)]
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some("A token from `pinfold serve token add NAME --role agent|operator`, as `Authorization: Bearer TOKEN`"))
            .build();
        doc.components.get_or_insert_with(Default::default).add_security_scheme("bearer", SecurityScheme::Http(scheme));
        // An empty PUT body writes an empty file: the body may be left out.
        if let Some(body) = doc.paths.paths.get_mut("/v1/sandboxes/{id}/files").and_then(|p| p.put.as_mut()).and_then(|op| op.request_body.as_mut()) {
            body.required = Some(utoipa::openapi::Required::False);
        }
    }
}

/// This document. Needs no token.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "server",
    responses(
        (status = 200, description = "The OpenAPI document of this API", content_type = "application/json", body = Object),
        (status = 403, description = "bad_host", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn openapi_json() -> Response {
    static DOC: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| serde_json::to_vec(&ApiDoc::openapi()).unwrap_or_default());
    ([(axum::http::header::CONTENT_TYPE, "application/json")], DOC.as_slice()).into_response()
}

// --- who is asking ---

impl FromRequestParts<App> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Actor, ApiError> {
        let Some(token) = bearer(&parts.headers) else {
            // The dashboard's session cookie. A browser sends a cookie with requests other
            // pages make too: one that changes state must name this server as its Origin
            // (the guard has already refused any other Origin).
            let session = crate::dashboard::session_cookie(&parts.headers).ok_or(ApiError::Unauthorized)?;
            if !matches!(parts.method, axum::http::Method::GET | axum::http::Method::HEAD) && !parts.headers.contains_key("origin") {
                return Err(ApiError::BadOrigin);
            }
            if !app.limiter.allow(&format!("s:{}", crate::token_hash(session))) {
                return Err(ApiError::RateLimited);
            }
            return crate::dashboard::actor_by_session(app, session)?.ok_or_else(|| failed_auth(app, parts));
        };
        let hash = crate::token_hash(token);
        // Per token, before the database is asked: a flood with one token stops here.
        if !app.limiter.allow(&format!("t:{hash}")) {
            return Err(ApiError::RateLimited);
        }
        match db::actor_by_hash(&app.db(), &hash)? {
            Some(a) => Ok(a),
            None => Err(failed_auth(app, parts)),
        }
    }
}

/// A request whose credentials do not hold: 401, or 429 once its address has failed more than
/// the rate a second (guessing tokens).
fn failed_auth(app: &App, parts: &Parts) -> ApiError {
    let ip = parts.extensions.get::<crate::guard::Peer>().map(|p| p.0.ip().to_string()).unwrap_or_default();
    if app.limiter.allow(&format!("ip:{ip}")) { ApiError::Unauthorized } else { ApiError::RateLimited }
}

/// The bearer token: `Authorization: Bearer T`.
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

/// How long a request's body may take to arrive, once its headers have (`--body-timeout`,
/// set once when the server starts; 30 s).
pub(crate) static BODY_TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

/// The whole body, at most `limit` bytes, within [`BODY_TIMEOUT`]: a client that trickles a
/// body does not hold a connection longer.
pub(crate) async fn body_within(body: Body, limit: usize) -> Result<bytes::Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, limit);
    let within = *BODY_TIMEOUT.get().unwrap_or(&Duration::from_secs(30));
    match tokio::time::timeout(within, limited.collect()).await {
        Err(_) => Err(ApiError::Timeout),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::TooLarge(limit)),
        Ok(Err(_)) => Err(ApiError::BadRequest("the request body could not be read".into())),
    }
}

async fn read_bytes(body: Body, limit: usize) -> Result<Vec<u8>, ApiError> {
    body_within(body, limit).await.map(|b| b.to_vec())
}

async fn read_json<T: serde::de::DeserializeOwned>(body: Body, limit: usize, empty_ok: bool) -> Result<T, ApiError> {
    let bytes = read_bytes(body, limit).await?;
    // A body that may be left out may also be JSON `null`. Whitespace is JSON's four bytes
    // (RFC 8259), not Rust's ASCII set: a lone form feed is no JSON and gets a 400.
    let json_ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let inner = {
        let start = bytes.iter().position(|b| !json_ws(b)).unwrap_or(bytes.len());
        let end = bytes.iter().rposition(|b| !json_ws(b)).map_or(start, |e| e + 1);
        &bytes[start..end]
    };
    let bytes: &[u8] = if empty_ok && (inner.is_empty() || inner == b"null") { b"{}" } else { &bytes };
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadRequest(format!("the body is not the JSON this endpoint takes: {e}")))
}

/// A path parameter. One axum cannot read (percent-encoded bytes that are not UTF-8) is a
/// `bad_request` in the JSON every other error is, not axum's plain-text rejection.
#[derive(Debug)]
pub(crate) struct UrlPath<T>(pub T);

impl<T: serde::de::DeserializeOwned + Send> FromRequestParts<App> for UrlPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<UrlPath<T>, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, app).await {
            Ok(axum::extract::Path(t)) => Ok(UrlPath(t)),
            Err(e) => Err(ApiError::BadRequest(format!("bad path: {}", e.body_text()))),
        }
    }
}

fn query<T>(q: Result<Query<T>, axum::extract::rejection::QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t).map_err(|e| ApiError::BadRequest(format!("bad query: {}", e.body_text())))
}

// --- sandboxes ---

/// `POST /v1/sandboxes`'s body. Every field may be left out; so may the whole body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSandbox {
    /// An existing directory beneath one of the server's workspace roots; without it the
    /// server makes a fresh, empty workspace (removed with the sandbox).
    workspace: Option<String>,
    /// A sandbox preset the workspace's policy defines; without it, the policy's default.
    preset: Option<String>,
    /// Seconds the sandbox lives, 1 to 604800 (a week); the server's default without it.
    #[schema(minimum = 1, maximum = 604800)]
    ttl_s: Option<u64>,
    /// Where its commands run, over the preset's `backend`: `process`, `gvisor` or `container` (see
    /// docs/backends.md). Refused when this machine cannot run it.
    #[schema(example = "gvisor")]
    backend: Option<String>,
}

/// The most a sandbox may live.
const MAX_TTL_S: u64 = 7 * 24 * 3600;

/// A sandbox, as the API shows it. Times are Unix seconds.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxView {
    #[schema(example = "sb_0123456789abcdef01234567")]
    pub id: String,
    /// The workspace directory, canonical.
    pub workspace: String,
    /// The preset named when it was made (null: the policy's default).
    pub preset: Option<String>,
    /// The name of the token that made it.
    pub owner: String,
    /// The backend asked for when it was made (null: the preset's).
    pub backend: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_used: i64,
}

impl From<&Sandbox> for SandboxView {
    fn from(s: &Sandbox) -> SandboxView {
        SandboxView {
            id: s.id.clone(),
            workspace: s.workspace.clone(),
            preset: s.preset.clone(),
            owner: s.owner.clone(),
            backend: s.backend.clone(),
            created_at: s.created_at,
            expires_at: s.expires_at,
            last_used: s.last_used,
        }
    }
}

/// A sandbox's JSON form (the REST answer's, for the other doors).
pub fn sandbox_view(s: &Sandbox) -> Value {
    json!(SandboxView::from(s))
}

/// `GET /v1/sandboxes`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct SandboxList {
    pub sandboxes: Vec<SandboxView>,
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

/// Make a sandbox: a fresh workspace, or an existing directory beneath a workspace root.
#[utoipa::path(post, path = "/v1/sandboxes", tag = "sandboxes", security(("bearer" = [])),
    request_body(content = Option<CreateSandbox>, description = "May be empty (the same as `{}`)"),
    responses(
        (status = 201, description = "The sandbox was made", body = SandboxView),
        (status = 400, description = "bad_request (the body, the TTL or an unknown preset) or bad_path (the workspace is not an existing directory)", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "forbidden (the workspace is not beneath a workspace root), bad_host or bad_origin", body = ErrorBody),
        (status = 409, description = "policy_error: the workspace's policy does not load", body = ErrorBody),
        (status = 413, description = "too_large: the body is over the server's limit", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn create_sandbox(State(app): State<App>, actor: Actor, body: Body) -> Result<Response, ApiError> {
    let req: CreateSandbox = read_json(body, app.opts.max_body, true).await?;
    let sb = new_sandbox(&app, &actor, req.workspace, req.preset, req.ttl_s, req.backend)?;
    Ok((StatusCode::CREATED, Json(SandboxView::from(&sb))).into_response())
}

/// Make a sandbox for `actor` (REST's POST /v1/sandboxes, MCP's `create_sandbox`).
pub(crate) fn new_sandbox(
    app: &App,
    actor: &Actor,
    requested: Option<String>,
    preset: Option<String>,
    ttl_s: Option<u64>,
    backend: Option<String>,
) -> Result<Sandbox, ApiError> {
    if let Some(b) = &backend {
        let kind: pinfold_sandbox::BackendKind = b.parse().map_err(|e: pinfold_sandbox::UnknownBackend| ApiError::BadRequest(e.to_string()))?;
        let status = kind.backend().status();
        if !status.available {
            let fix = status.fix.map(|f| format!("; {f}")).unwrap_or_default();
            return Err(ApiError::BadRequest(format!("the {b} backend cannot run here: {}{fix}", status.detail)));
        }
    }
    let id = format!("sb_{}", crate::random_hex(12));
    let ttl = ttl_s.unwrap_or(app.opts.sandbox_ttl_s);
    if ttl == 0 || ttl > MAX_TTL_S {
        return Err(ApiError::BadRequest(format!("ttl_s must be between 1 and {MAX_TTL_S}")));
    }
    let (workspace, fresh) = match &requested {
        Some(w) => {
            let c = crate::canonical_dir(Path::new(w)).map_err(|e| ApiError::BadPath(format!("the workspace `{w}` is not an existing directory: {e}")))?;
            if !app.opts.workspace_roots.iter().any(|r| c.starts_with(r)) {
                return Err(ApiError::Forbidden(format!(
                    "the workspace `{}` is not beneath a directory this server lets sandboxes use (pinfold serve --workspace-root DIR)",
                    c.display()
                )));
            }
            // Never around or inside the server's fresh workspaces: a sandbox there could
            // reach every later fresh sandbox.
            if let Ok(fresh) = crate::canonical_dir(&app.opts.workspaces)
                && (fresh.starts_with(&c) || c.starts_with(&fresh))
            {
                return Err(ApiError::Forbidden(format!("the workspace `{}` holds or is inside the server's fresh workspaces; name another directory", c.display())));
            }
            // A workspace inside another live sandbox's, or holding one, is refused: the outer
            // sandbox could put a link at the inner one's path. Which sandbox is named only to
            // its owner (or an operator).
            let others = db::sandboxes(&app.db(), None)?;
            if let Some(o) = others.iter().find(|o| {
                let w = Path::new(&o.workspace);
                w != c && (w.starts_with(&c) || c.starts_with(w))
            }) {
                let which = if o.owner == actor.name || actor.role == Role::Operator { format!("sandbox {} (`{}`)", o.id, o.workspace) } else { "another sandbox".to_string() };
                return Err(ApiError::Conflict(format!("the workspace `{}` is inside or around the workspace of {which}; sandboxes' workspaces may not nest", c.display())));
            }
            (c, false)
        }
        None => {
            let d = app.opts.workspaces.join(&id);
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().mode(0o700).create(&d).map_err(|e| ApiError::internal(format!("cannot create {}: {e}", d.display())))?;
            (crate::canonical_dir(&d).map_err(ApiError::internal)?, true)
        }
    };
    let id_of = std::fs::metadata(&workspace).map_err(|e| ApiError::BadPath(format!("the workspace cannot be read: {e}")))?;
    let cleanup = |e: ApiError| {
        if fresh {
            let _ = std::fs::remove_dir_all(&workspace);
        }
        e
    };
    if let Some(p) = &preset {
        let policy = pinfold_plan::load::policy(None, Some(&workspace), true, &app.dirs_for(&id)).map_err(|e| cleanup(ApiError::Policy(e.to_string())))?;
        if !policy.config().sandboxes.contains_key(p) {
            let known: Vec<&String> = policy.config().sandboxes.keys().collect();
            return Err(cleanup(ApiError::BadRequest(format!("no sandbox preset named `{p}`; the policy defines: {}", known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")))));
        }
    }
    let now = db::now();
    let sb = Sandbox {
        id,
        workspace: workspace.display().to_string(),
        preset,
        owner: actor.name.clone(),
        fresh,
        created_at: now,
        expires_at: now + ttl as i64,
        idle_s: app.opts.sandbox_idle_s as i64,
        last_used: now,
        dev: Some(std::os::unix::fs::MetadataExt::dev(&id_of) as i64),
        ino: Some(std::os::unix::fs::MetadataExt::ino(&id_of) as i64),
        backend,
    };
    record(app, "serve_sandbox", json!({"event": "created", "actor": actor.name, "sandbox": sb.id, "workspace": sb.workspace, "preset": sb.preset, "backend": sb.backend, "expires_at": sb.expires_at}))
        .map_err(cleanup)?;
    db::insert_sandbox(&app.db(), &sb).map_err(|e| cleanup(e.into()))?;
    Ok(sb)
}

/// The sandbox `id` as `actor` may see it: an agent sees its own only.
pub(crate) fn visible_sandbox(app: &App, actor: &Actor, id: &str) -> Result<Sandbox, ApiError> {
    let sb = db::sandbox(&app.db(), id)?;
    match sb {
        Some(s) if actor.role == Role::Operator || s.owner == actor.name => Ok(s),
        _ => Err(ApiError::NotFound(format!("no sandbox `{id}`"))),
    }
}

/// The sandboxes the token may see: an agent's own, or all of them for an operator.
#[utoipa::path(get, path = "/v1/sandboxes", tag = "sandboxes", security(("bearer" = [])),
    responses(
        (status = 200, description = "The sandboxes", body = SandboxList),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "bad_host", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn list_sandboxes(State(app): State<App>, actor: Actor) -> Result<Json<SandboxList>, ApiError> {
    let owner = (actor.role == Role::Agent).then_some(actor.name.as_str());
    let list = db::sandboxes(&app.db(), owner)?;
    Ok(Json(SandboxList { sandboxes: list.iter().map(SandboxView::from).collect() }))
}

/// One sandbox.
#[utoipa::path(get, path = "/v1/sandboxes/{id}", tag = "sandboxes", security(("bearer" = [])),
    params(("id" = String, Path, description = "The sandbox's id")),
    responses(
        (status = 200, description = "The sandbox", body = SandboxView),
        (status = 400, description = "bad_request: the path is not valid", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "bad_host", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox, or another agent's", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn get_sandbox(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>) -> Result<Json<SandboxView>, ApiError> {
    Ok(Json(SandboxView::from(&visible_sandbox(&app, &actor, &id)?)))
}

/// Remove a sandbox: what runs in it is stopped, a fresh workspace is deleted.
#[utoipa::path(delete, path = "/v1/sandboxes/{id}", tag = "sandboxes", security(("bearer" = [])),
    params(("id" = String, Path, description = "The sandbox's id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "bad_request: the path is not valid", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "bad_host or bad_origin", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox, or another agent's", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
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
    // Its kept container, when its runs were on the container backend (a run killed just now
    // takes it along itself; this removes an idle one).
    let kept = sb.id.clone();
    std::thread::spawn(move || {
        if let Err(e) = pinfold_sandbox::remove_kept(&kept) {
            crate::log(&format!("could not remove the kept container of {kept}: {e}"));
        }
    });
    if let Some(c) = app.dirs_for(&sb.id).cache {
        let _ = std::fs::remove_dir_all(c);
    }
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

/// `POST /v1/sandboxes/{id}/exec`'s body: exactly one of `command` and `argv`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// Shell text, judged and run as `pinfold exec` would.
    #[schema(example = "make test")]
    command: Option<String>,
    /// A command as words (joined with shell quoting); not empty.
    argv: Option<Vec<String>>,
    /// Seconds before the run is stopped (cut to the server's ceiling).
    #[schema(format = Int64, minimum = 0, maximum = 4294967295_u64)]
    timeout_s: Option<u32>,
    /// Text given to the command's standard input.
    stdin: Option<String>,
}

/// The policy's verdict on a run that happened: `allow`, or `ask` when a person approved it.
#[derive(ToSchema)]
#[schema(as = Verdict)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // only the schema of pinfold_policy's verdict, which serialises the same way
enum VerdictSchema {
    Allow,
    Ask,
}

/// A run's result.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecResult {
    /// The command's exit status (128 + N when signal N ended it).
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// An output stream was longer than `output_limit` bytes and was cut.
    pub truncated: bool,
    /// The most bytes kept of each stream.
    pub output_limit: usize,
    /// The run was stopped at its timeout.
    pub timed_out: bool,
    pub duration_ms: u64,
    #[schema(value_type = VerdictSchema)]
    pub verdict: Verdict,
}

impl ExecResult {
    pub fn new(o: &Output, verdict: Verdict) -> ExecResult {
        ExecResult {
            exit_code: o.exit_code,
            stdout: o.stdout.clone(),
            stderr: o.stderr.clone(),
            truncated: o.truncated,
            output_limit: o.output_limit,
            timed_out: o.timed_out,
            duration_ms: o.duration_ms,
            verdict,
        }
    }
}

/// A run's result as JSON (an approval's `result`, the exec answer).
pub fn exec_body(o: &Output, verdict: Verdict) -> Value {
    json!(ExecResult::new(o, verdict))
}

/// The approval an exec waits for (answered with 202).
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingApproval {
    pub approval: ApprovalRef,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalRef {
    #[schema(example = "ap_0123456789abcdef01234567")]
    pub id: String,
    /// `pending`.
    pub status: String,
    /// Where to poll it (`GET /v1/approvals/{id}?wait=S`).
    pub url: String,
    /// Why the policy asks.
    pub reason: String,
    /// Unix seconds; undecided by then, it expires.
    pub expires_at: i64,
}

/// The command an exec names: shell text as given, or an argv quoted into shell text.
pub(crate) fn exec_text(command: Option<String>, argv: Option<Vec<String>>) -> Result<String, ApiError> {
    match (command, argv) {
        (Some(c), None) => Ok(c),
        (None, Some(argv)) if !argv.is_empty() => Ok(pinfold_shell::join(&argv)),
        _ => Err(ApiError::BadRequest("give exactly one of `command` (shell text) or `argv` (a non-empty list)".into())),
    }
}

fn approval_url(app: &App, id: &str) -> String {
    let host = app.hosts.lock().unwrap_or_else(|p| p.into_inner()).first().cloned().unwrap_or_default();
    format!("http://{host}/v1/approvals/{id}")
}

pub(crate) fn pending_body(app: &App, a: &Approval) -> Value {
    json!(PendingApproval {
        approval: ApprovalRef { id: a.id.clone(), status: a.status.clone(), url: approval_url(app, &a.id), reason: a.reason.clone(), expires_at: a.expires_at },
    })
}

/// Run a command in the sandbox, governed: judged by the policy, put to a person when the
/// policy asks, recorded before and after. With `Accept: text/event-stream` the output comes
/// as `stdout` and `stderr` events (data: `{"data": TEXT}`), then one `result`, `approval` or
/// `error` event whose data is the JSON answer's body.
#[utoipa::path(post, path = "/v1/sandboxes/{id}/exec", tag = "exec", security(("bearer" = [])),
    params(
        ("id" = String, Path, description = "The sandbox's id"),
        ("Idempotency-Key" = Option<String>, Header, description = "1-200 characters: the same key and body get the first answer again, and nothing runs twice")
    ),
    request_body = ExecRequest,
    responses(
        (status = 200, description = "It ran (a non-zero exit code is still 200)", content(
            (ExecResult = "application/json"),
            (String = "text/event-stream")
        ), headers(("idempotent-replayed" = String, description = "`true` on an answer given again for an Idempotency-Key"))),
        (status = 202, description = "The policy asks a person: an approval is pending and nothing ran", body = PendingApproval),
        (status = 400, description = "bad_request: the body, an empty command, a command that does not parse, or the Idempotency-Key", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "denied: the policy denies the command (nothing ran); or bad_host, bad_origin", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox, or another agent's", body = ErrorBody),
        (status = 409, description = "conflict (the Idempotency-Key was used for another request) or policy_error", body = ErrorBody),
        (status = 413, description = "too_large: the body is over the server's limit", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn exec(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let bytes = read_bytes(body, app.opts.max_body).await?;
    let req: ExecRequest = serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("the body is not the JSON this endpoint takes: {e}")))?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    let text = exec_text(req.command, req.argv)?;
    let action = Action::Exec { text, stdin: req.stdin, timeout_s: req.timeout_s.map_or(app.opts.default_timeout_s, u64::from) };
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
        // Reserved before anything runs: of requests racing with one key, one runs and the
        // others are told it is in progress.
        if let Some((h, status, body)) = db::reserve_idempotent(&app.db(), &actor.name, k, &request_hash)? {
            if h != request_hash {
                return Err(ApiError::Conflict("this Idempotency-Key was used for a different request".into()));
            }
            if status == 0 {
                return Err(ApiError::Conflict("a request with this Idempotency-Key is still running; ask again when it has answered".into()));
            }
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let mut r = (status, body).into_response();
            r.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
            r.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            return Ok(r);
        }
    }
    let answered = match govern::govern(&app, &actor, &sb, action, None, None).await {
        Ok(Governed::Ran { output, verdict }) => Ok((StatusCode::OK, exec_body(&output, verdict))),
        Ok(Governed::Pending(a)) => Ok((StatusCode::ACCEPTED, pending_body(&app, &a))),
        Ok(_) => Err(ApiError::internal("exec gave no run")),
        Err(e @ (ApiError::Denied(_) | ApiError::BadRequest(_))) => Ok((e.status(), e.body())),
        Err(e) => Err(e),
    };
    let (status, body) = match answered {
        Ok(x) => x,
        Err(e) => {
            // Nothing to give again: the key is free for a retry.
            if let Some(k) = &key {
                let _ = db::forget_idempotent(&app.db(), &actor.name, k);
            }
            return Err(e);
        }
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

/// Read a file beneath the workspace, as the sandbox's preset allows.
#[utoipa::path(get, path = "/v1/sandboxes/{id}/files", tag = "files", security(("bearer" = [])),
    params(
        ("id" = String, Path, description = "The sandbox's id"),
        ("path" = String, Query, min_length = 1, description = "The file, relative to the workspace")
    ),
    responses(
        (status = 200, description = "The file's bytes", content_type = "application/octet-stream", body = FileBytes),
        (status = 400, description = "bad_request (no ?path) or bad_path (it leaves the workspace, or is a directory)", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "denied: the sandbox may not read it; forbidden; bad_host", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox, or no such file", body = ErrorBody),
        (status = 409, description = "policy_error, or the workspace cannot be opened", body = ErrorBody),
        (status = 413, description = "too_large: the file is over the server's limit", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
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

/// A file's raw bytes (the document's schema of a file body).
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // only a schema: the bytes are read and written as they are
struct FileBytes(Vec<u8>);

/// `PUT /v1/sandboxes/{id}/files`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct FileWritten {
    /// The file, relative to the workspace.
    pub path: String,
    /// Bytes written.
    pub bytes: usize,
}

/// Write a file beneath the workspace (its directories made), as the sandbox's preset allows.
#[utoipa::path(put, path = "/v1/sandboxes/{id}/files", tag = "files", security(("bearer" = [])),
    params(
        ("id" = String, Path, description = "The sandbox's id"),
        ("path" = String, Query, min_length = 1, description = "The file, relative to the workspace")
    ),
    request_body(content = FileBytes, content_type = "application/octet-stream", description = "The file's new contents, raw"),
    responses(
        (status = 200, description = "Written", body = FileWritten),
        (status = 400, description = "bad_request (no ?path) or bad_path (it leaves the workspace, or is a directory)", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "denied: the sandbox may not write it (a protected path); forbidden; bad_host, bad_origin", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox", body = ErrorBody),
        (status = 409, description = "policy_error, or the workspace cannot be opened", body = ErrorBody),
        (status = 413, description = "too_large: the body is over the server's file limit", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn write_file(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>, body: Body) -> Result<Json<FileWritten>, ApiError> {
    let path = need_path(query(q)?)?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    let bytes = read_bytes(body, app.opts.max_file).await?;
    let n = bytes.len();
    govern::govern(&app, &actor, &sb, Action::Write { path: path.clone(), bytes }, None, None).await?;
    Ok(Json(FileWritten { path, bytes: n }))
}

/// Remove a file, or an empty directory, beneath the workspace.
#[utoipa::path(delete, path = "/v1/sandboxes/{id}/files", tag = "files", security(("bearer" = [])),
    params(
        ("id" = String, Path, description = "The sandbox's id"),
        ("path" = String, Query, min_length = 1, description = "The file or empty directory, relative to the workspace")
    ),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "bad_request (no ?path) or bad_path (it leaves the workspace)", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "denied: the sandbox may not write it; forbidden; bad_host, bad_origin", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox, or no such file", body = ErrorBody),
        (status = 409, description = "conflict (a directory that is not empty), policy_error, or the workspace cannot be opened", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn delete_file(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>) -> Result<StatusCode, ApiError> {
    let path = need_path(query(q)?)?;
    let sb = visible_sandbox(&app, &actor, &id)?;
    govern::govern(&app, &actor, &sb, Action::Delete { path }, None, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/sandboxes/{id}/dir`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct DirEntries {
    pub entries: Vec<DirEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DirEntry {
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    #[serde(rename = "type")]
    #[schema(example = "file")]
    pub kind: String,
    /// Bytes.
    pub size: u64,
}

/// List a directory beneath the workspace (the workspace itself without ?path).
#[utoipa::path(get, path = "/v1/sandboxes/{id}/dir", tag = "files", security(("bearer" = [])),
    params(
        ("id" = String, Path, description = "The sandbox's id"),
        ("path" = Option<String>, Query, description = "The directory, relative to the workspace")
    ),
    responses(
        (status = 200, description = "The directory's entries", body = DirEntries),
        (status = 400, description = "bad_request or bad_path (it leaves the workspace, or is not a directory)", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "denied: the sandbox may not read it; forbidden; bad_host", body = ErrorBody),
        (status = 404, description = "not_found: no such sandbox, or no such directory", body = ErrorBody),
        (status = 409, description = "policy_error, or the workspace cannot be opened", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn list_dir(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>) -> Result<Json<DirEntries>, ApiError> {
    let path = query(q)?.path.unwrap_or_default();
    let sb = visible_sandbox(&app, &actor, &id)?;
    match govern::govern(&app, &actor, &sb, Action::List { path }, None, None).await? {
        Governed::Entries(e) => Ok(Json(DirEntries { entries: e.into_iter().map(|(name, kind, size)| DirEntry { name, kind: kind.to_string(), size }).collect() })),
        _ => Err(ApiError::internal("list gave no entries")),
    }
}

// --- approvals ---

/// An approval's state.
#[derive(ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // only a schema: the state is kept as text (see STATUSES)
enum ApprovalStatus {
    Pending,
    /// Approved, and running.
    Approved,
    Denied,
    Expired,
    /// It ran; see `result`.
    Consumed,
}

/// An approval: an action the policy put to a person, and what came of it. Times are Unix
/// seconds.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalView {
    #[schema(example = "ap_0123456789abcdef01234567")]
    pub id: String,
    #[schema(value_type = ApprovalStatus)]
    pub status: String,
    /// The canonical action the approval binds (kind, command, sandbox, workspace, preset…).
    #[schema(value_type = Object)]
    pub action: Value,
    /// SHA-256 of the canonical action.
    pub action_hash: String,
    /// Why the policy asks.
    pub reason: String,
    /// The sandbox's id.
    pub sandbox: String,
    pub requested_by: String,
    pub decided_by: Option<String>,
    pub decision_reason: Option<String>,
    /// The run's result once it ran: an exec result, or `{"error": {"code", "message"}}`.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub created_at: i64,
    pub expires_at: i64,
    pub decided_at: Option<i64>,
    pub url: String,
}

impl ApprovalView {
    pub fn new(app: &App, a: &Approval) -> ApprovalView {
        ApprovalView {
            id: a.id.clone(),
            status: a.status.clone(),
            action: a.action.clone(),
            action_hash: a.action_hash.clone(),
            reason: a.reason.clone(),
            sandbox: a.sandbox.clone(),
            requested_by: a.requested_by.clone(),
            decided_by: a.decided_by.clone(),
            decision_reason: a.decision_reason.clone(),
            result: a.result.clone(),
            created_at: a.created_at,
            expires_at: a.expires_at,
            decided_at: a.decided_at,
            url: approval_url(app, &a.id),
        }
    }
}

/// An approval's JSON form (the REST answer's, for the other doors).
pub fn approval_view(app: &App, a: &Approval) -> Value {
    json!(ApprovalView::new(app, a))
}

/// `GET /v1/approvals`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalList {
    pub approvals: Vec<ApprovalView>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListApprovals {
    /// Only approvals in this state.
    #[param(value_type = Option<ApprovalStatus>)]
    status: Option<String>,
    /// The most to list (1-1000; 100 without it).
    limit: Option<i64>,
}

const STATUSES: &[&str] = &["pending", "approved", "denied", "expired", "consumed"];

/// Approvals, newest first: an agent's own, or everyone's for an operator.
#[utoipa::path(get, path = "/v1/approvals", tag = "approvals", security(("bearer" = [])),
    params(ListApprovals),
    responses(
        (status = 200, description = "The approvals", body = ApprovalList),
        (status = 400, description = "bad_request: an unknown status or a bad query", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "bad_host", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn list_approvals(State(app): State<App>, actor: Actor, q: Result<Query<ListApprovals>, axum::extract::rejection::QueryRejection>) -> Result<Json<ApprovalList>, ApiError> {
    let q = query(q)?;
    if let Some(s) = &q.status
        && !STATUSES.contains(&s.as_str())
    {
        return Err(ApiError::BadRequest(format!("unknown status `{s}`; use one of {}", STATUSES.join(", "))));
    }
    let by = (actor.role == Role::Agent).then_some(actor.name.as_str());
    let list = db::approvals(&app.db(), q.status.as_deref(), by, q.limit.unwrap_or(100).clamp(1, 1000))?;
    Ok(Json(ApprovalList { approvals: list.iter().map(|a| ApprovalView::new(&app, a)).collect() }))
}

pub(crate) fn visible_approval(app: &App, actor: &Actor, id: &str) -> Result<Approval, ApiError> {
    match db::approval(&app.db(), id)? {
        Some(a) if actor.role == Role::Operator || a.requested_by == actor.name => Ok(a),
        _ => Err(ApiError::NotFound(format!("no approval `{id}`"))),
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Wait {
    /// Seconds to wait (at most 60) while the approval is pending or running: a long poll.
    wait: Option<i64>,
}

/// The longest a long poll waits.
pub(crate) const MAX_WAIT_S: u64 = 60;

/// One approval; with ?wait=S, answered when it is decided and done, or after S seconds.
#[utoipa::path(get, path = "/v1/approvals/{id}", tag = "approvals", security(("bearer" = [])),
    params(("id" = String, Path, description = "The approval's id"), Wait),
    responses(
        (status = 200, description = "The approval", body = ApprovalView),
        (status = 400, description = "bad_request: a bad query", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "bad_host", body = ErrorBody),
        (status = 404, description = "not_found: no such approval, or another agent's", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn get_approval(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, q: Result<Query<Wait>, axum::extract::rejection::QueryRejection>) -> Result<Json<ApprovalView>, ApiError> {
    let a = wait_approval(&app, &actor, &id, query(q)?.wait.unwrap_or(0).max(0) as u64).await?;
    Ok(Json(ApprovalView::new(&app, &a)))
}

/// The approval `id` as `actor` may see it, once it reaches a state nobody acts on any more
/// (denied, expired, consumed) or after `wait_s` seconds (at most [`MAX_WAIT_S`]).
pub(crate) async fn wait_approval(app: &App, actor: &Actor, id: &str, wait_s: u64) -> Result<Approval, ApiError> {
    // Long polls hold a connection each: a token may hold a few, all of them together a share
    // of the connections; past that the answer comes at once.
    let Some(_slot) = crate::LongPoll::take(app, &actor.name) else {
        return visible_approval(app, actor, id);
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s.min(MAX_WAIT_S));
    let mut changes = app.approvals_watch();
    loop {
        let a = visible_approval(app, actor, id)?;
        if !matches!(a.status.as_str(), "pending" | "approved") || tokio::time::Instant::now() >= deadline {
            return Ok(a);
        }
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            return visible_approval(app, actor, id);
        }
    }
}

/// An operator's decision: the body of approve and deny (it may be empty).
#[derive(Debug, Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Why (at most 4096 bytes); recorded in the ledger.
    reason: Option<String>,
}

/// Approve a pending approval (an operator, not the one who asked): the action runs once, in
/// its sandbox, and its result lands on the approval.
#[utoipa::path(post, path = "/v1/approvals/{id}/approve", tag = "approvals", security(("bearer" = [])),
    params(("id" = String, Path, description = "The approval's id")),
    request_body(content = Option<Decision>, description = "May be empty"),
    responses(
        (status = 200, description = "Approved: the approval, now `approved` (it runs)", body = ApprovalView),
        (status = 400, description = "bad_request: the body, or a reason over 4096 bytes", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "forbidden (an agent's token), self_approval (the operator asked for it), bad_host or bad_origin", body = ErrorBody),
        (status = 404, description = "not_found: no such approval", body = ErrorBody),
        (status = 409, description = "conflict: not pending any more (decided, or expired)", body = ErrorBody),
        (status = 413, description = "too_large: the body is over the server's limit", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn approve(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, body: Body) -> Result<Json<ApprovalView>, ApiError> {
    let d: Decision = read_json(body, app.opts.max_body, true).await?;
    let a = decide(&app, &actor, &id, "approved", d.reason)?;
    // The action runs once, in its sandbox; its result lands on the approval.
    let app2 = app.clone();
    let a2 = a.clone();
    tokio::spawn(async move { govern::run_approved(&app2, a2).await });
    Ok(Json(ApprovalView::new(&app, &a)))
}

/// Deny a pending approval (an operator, not the one who asked): it never runs.
#[utoipa::path(post, path = "/v1/approvals/{id}/deny", tag = "approvals", security(("bearer" = [])),
    params(("id" = String, Path, description = "The approval's id")),
    request_body(content = Option<Decision>, description = "May be empty"),
    responses(
        (status = 200, description = "Denied: the approval, now `denied`", body = ApprovalView),
        (status = 400, description = "bad_request: the body, or a reason over 4096 bytes", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "forbidden (an agent's token), self_approval (the operator asked for it), bad_host or bad_origin", body = ErrorBody),
        (status = 404, description = "not_found: no such approval", body = ErrorBody),
        (status = 409, description = "conflict: not pending any more (decided, or expired)", body = ErrorBody),
        (status = 413, description = "too_large: the body is over the server's limit", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
        (status = 503, description = "unrecorded: the ledger cannot be written, so nothing was done", body = ErrorBody)
    )
)]
async fn deny(State(app): State<App>, actor: Actor, UrlPath(id): UrlPath<String>, body: Body) -> Result<Json<ApprovalView>, ApiError> {
    let d: Decision = read_json(body, app.opts.max_body, true).await?;
    let a = decide(&app, &actor, &id, "denied", d.reason)?;
    Ok(Json(ApprovalView::new(&app, &a)))
}

/// An operator's decision on a pending approval that is not their own.
pub fn decide(app: &App, actor: &Actor, id: &str, to: &str, reason: Option<String>) -> Result<Approval, ApiError> {
    operator(actor)?;
    let a = db::approval(&app.db(), id)?.ok_or_else(|| ApiError::NotFound(format!("no approval `{id}`")))?;
    if a.requested_by.eq_ignore_ascii_case(&actor.name) {
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

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LedgerQuery {
    /// Only records with a greater `seq` (the last page's `next_after`).
    after: Option<i64>,
    /// The most records (1-1000; 100 without it).
    limit: Option<i64>,
}

/// A page of the audit ledger's records.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerPage {
    /// Records as the ledger holds them (`seq`, `kind`, `data`, the chain's hashes…).
    #[schema(value_type = Vec<Object>)]
    pub records: Vec<Value>,
    /// The last record's `seq`: the next page's `after` (null on an empty page).
    pub next_after: Option<u64>,
}

/// Read the ledger, in order (operators only).
#[utoipa::path(get, path = "/v1/ledger", tag = "ledger", security(("bearer" = [])),
    params(LedgerQuery),
    responses(
        (status = 200, description = "A page of records", body = LedgerPage),
        (status = 400, description = "bad_request: a bad query", body = ErrorBody),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "forbidden (an agent's token) or bad_host", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn ledger(State(app): State<App>, actor: Actor, q: Result<Query<LedgerQuery>, axum::extract::rejection::QueryRejection>) -> Result<Json<LedgerPage>, ApiError> {
    operator(&actor)?;
    let q = query(q)?;
    let dir = app.dirs.ledger_dir().map_err(ApiError::internal)?.to_path_buf();
    let after = q.after;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000) as usize;
    let records = tokio::task::spawn_blocking(move || pinfold_ledger::read_records(&dir)).await.map_err(ApiError::internal)?.map_err(ApiError::internal)?;
    let page: Vec<Value> = records.into_iter().filter(|r| r["seq"].as_u64().is_some_and(|s| after.is_none_or(|a| i128::from(s) > i128::from(a)))).take(limit).collect();
    let next = page.last().and_then(|r| r["seq"].as_u64());
    Ok(Json(LedgerPage { records: page, next_after: next }))
}

/// The ledger's state after a check of its chain and signatures.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum LedgerStatus {
    Intact,
    /// The last record is incomplete (a writer stopped mid-append).
    Torn,
    Tampered,
}

/// `GET /v1/ledger/verify`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct VerifyResult {
    pub status: LedgerStatus,
    /// Complete records read up to the first problem.
    pub records: u64,
    /// Signed records whose signature verified.
    pub checkpoints: u64,
    /// The hash of the last complete record.
    pub head: String,
    /// What is wrong, when something is.
    pub problem: Option<String>,
}

/// Verify the ledger's hash chain and signed checkpoints (operators only).
#[utoipa::path(get, path = "/v1/ledger/verify", tag = "ledger", security(("bearer" = [])),
    responses(
        (status = 200, description = "The check's result (a tampered ledger is still 200)", body = VerifyResult),
        (status = 401, description = "unauthorized: no valid bearer token", body = ErrorBody),
        (status = 403, description = "forbidden (an agent's token) or bad_host", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody)
    )
)]
async fn ledger_verify(State(app): State<App>, actor: Actor) -> Result<Json<VerifyResult>, ApiError> {
    operator(&actor)?;
    let dir = app.dirs.ledger_dir().map_err(ApiError::internal)?.to_path_buf();
    let r = tokio::task::spawn_blocking(move || pinfold_ledger::verify(&dir)).await.map_err(ApiError::internal)?.map_err(ApiError::internal)?;
    let status = match r.status() {
        pinfold_ledger::Status::Intact => LedgerStatus::Intact,
        pinfold_ledger::Status::Torn => LedgerStatus::Torn,
        pinfold_ledger::Status::Tampered => LedgerStatus::Tampered,
    };
    Ok(Json(VerifyResult { status, records: r.records, checkpoints: r.checkpoints, head: r.head, problem: r.problem.map(|p| format!("{p:?}")) }))
}

// --- start-up and housekeeping ---

/// After a restart: an approval that was running when the server stopped is closed with that
/// fact (it is never run twice); a fresh workspace that is gone takes its sandbox with it.
pub fn reconcile(app: &App) {
    // An Idempotency-Key reserved by a request the stop cut short is free again.
    let _ = db::forget_running_idempotent(&app.db());
    let interrupted = db::approvals(&app.db(), Some("approved"), None, i64::MAX).unwrap_or_default();
    for a in interrupted {
        let r = json!({"error": {"code": "interrupted", "message": "the server stopped while this action ran, and the run was killed with it; what it did before stays, and it is not run again"}});
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
