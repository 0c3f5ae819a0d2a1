//! MCP (the Model Context Protocol) at `POST /mcp`, over streamable HTTP, with the official
//! SDK (rmcp). It is one more door to the one choke point: each tool that touches a sandbox
//! checks ownership as REST does ([`api::visible_sandbox`]) and hands the call to
//! [`govern::govern`]. The caller is the bearer token's name, checked on every HTTP request
//! before rmcp reads the message (no token: the same 401 JSON error as REST); the server's
//! guard (Host, Origin, rate limit, body size) runs before that, as for every route.
//!
//! The server keeps no MCP sessions: each POST carries one message and is answered on its own
//! (JSON, or server-sent events when rmcp has more than one message to send), so nothing about
//! a client outlives its request and a session id can never stand in for a token.
//!
//! A policy's *deny* and *ask* are tool results a model can act on, not transport errors:
//! `{"status": "denied", "reason"}` (isError) and `{"status": "approval_required", "approval":
//! {...}}`. Every other [`ApiError`] maps to a JSON-RPC error ([`to_mcp`], exhaustive), an
//! internal one without its detail. See docs/server.md, "MCP".

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api;
use crate::db::Actor;
use crate::error::ApiError;
use crate::govern::{self, Action, Governed};
use crate::App;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The `/mcp` endpoint: the bearer-token check, then rmcp's streamable-HTTP service.
pub fn service(app: App) -> impl tower::Service<Request, Response = Response, Error = Infallible, Future: Send + 'static> + Clone + Send + Sync + 'static {
    let config = StreamableHttpServerConfig::default()
        // Stateless: every request stands alone (see the module's comment).
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The guard already checked Host against the names this server answers for (with its
        // port and --allow-host), and Origin on every POST.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(app.opts.max_body)
        .with_sse_keep_alive(Some(Duration::from_secs(15)));
    let factory_app = app.clone();
    let mcp = StreamableHttpService::new(move || Ok(Tools { app: factory_app.clone() }), Arc::new(NeverSessionManager::default()), config);
    tower::ServiceBuilder::new().layer(axum::middleware::from_fn_with_state(app, authenticate)).service(mcp)
}

/// Who calls: a bearer token only (the dashboard's cookie is not a door to MCP). The actor
/// rides on the request's extensions, where rmcp hands them to the tool call.
async fn authenticate(State(app): State<App>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    if !parts.headers.contains_key(axum::http::header::AUTHORIZATION) {
        return ApiError::Unauthorized.into_response();
    }
    match Actor::from_request_parts(&mut parts, &app).await {
        Ok(actor) => {
            parts.extensions.insert(actor);
            // The body in full, capped and within the body timeout, before rmcp reads it.
            match api::body_within(body, app.opts.max_body).await {
                Ok(bytes) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
                Err(e) => e.into_response(),
            }
        }
        Err(e) => e.into_response(),
    }
}

/// The MCP server of one request.
#[derive(Debug, Clone)]
struct Tools {
    app: App,
}

// --- the tools' arguments (their JSON Schemas are made from these) ---

/// `create_sandbox`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateSandboxArgs {
    /// An existing directory beneath one of the server's workspace roots (`pinfold serve
    /// --workspace-root`). Without it, a fresh empty workspace, removed with the sandbox.
    workspace: Option<String>,
    /// A sandbox preset the workspace's policy defines; without it, the policy's default.
    preset: Option<String>,
    /// Seconds the sandbox lives (1 to 604800); the server's default without it.
    ttl_s: Option<u64>,
    /// Where its commands run, over the preset's: `process` or `gvisor`.
    backend: Option<String>,
}

/// `exec`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ExecArgs {
    /// The sandbox's id (from create_sandbox).
    sandbox: String,
    /// Shell text, run by bash in the workspace. Give this or `argv`.
    command: Option<String>,
    /// A program and its arguments, quoted for you. Give this or `command`.
    argv: Option<Vec<String>>,
    /// Text for the command's standard input.
    stdin: Option<String>,
    /// Seconds before the command is stopped (the server caps it).
    timeout_s: Option<u64>,
}

/// `read_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    /// The sandbox's id.
    sandbox: String,
    /// A file beneath the workspace: relative to it, or absolute inside it.
    path: String,
}

/// `write_file`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    /// The sandbox's id.
    sandbox: String,
    /// A file beneath the workspace: relative to it, or absolute inside it. Missing
    /// directories are made.
    path: String,
    /// The file's new content, as text (UTF-8). Give this or `content_base64`.
    content: Option<String>,
    /// The file's new content, as base64 (for bytes that are not text).
    content_base64: Option<String>,
}

/// `list_dir`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// The sandbox's id.
    sandbox: String,
    /// A directory beneath the workspace; the workspace itself without it.
    path: Option<String>,
}

/// `approval_status`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApprovalArgs {
    /// The approval's id (from an approval_required result).
    id: String,
    /// Seconds to wait (at most 60) while the approval is pending or its action runs.
    wait_s: Option<u64>,
}

// --- the tools' results ---

/// An output schema: `status` is one of `statuses`; `ok` holds the properties of an `ok`
/// result; a `denied` result has `reason`, an `approval_required` one `approval`.
fn output_schema(statuses: &[&str], ok: Value) -> Arc<JsonObject> {
    let mut props = json!({
        "status": {"type": "string", "enum": statuses, "description": "ok: done. denied: the policy refuses it and nothing was done (do not retry it in another form). approval_required: nothing was done yet; a person decides (see approval_status)."},
    });
    if statuses.contains(&"denied") {
        props["reason"] = json!({"type": "string", "description": "Why the policy denies it (status denied)."});
    }
    if statuses.contains(&"approval_required") {
        props["approval"] = json!({
            "type": "object",
            "description": "The pending approval (status approval_required): poll it with approval_status.",
            "properties": {
                "id": {"type": "string"},
                "status": {"type": "string"},
                "url": {"type": "string", "description": "Where a person (or the REST API) sees it."},
                "reason": {"type": "string", "description": "Why the policy asks."},
                "expires_at": {"type": "integer", "description": "Unix seconds; undecided by then, it expires."}
            },
            "required": ["id", "status", "url", "reason", "expires_at"]
        });
        props["next"] = json!({"type": "string", "description": "What to do next (status approval_required)."});
    }
    if let (Some(p), Some(extra)) = (props.as_object_mut(), ok.as_object()) {
        p.extend(extra.clone());
    }
    let schema = json!({"type": "object", "properties": props, "required": ["status"]});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

fn exec_output() -> Value {
    json!({
        "exit_code": {"type": "integer", "description": "The command's exit status (128+N: killed by signal N)."},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "truncated": {"type": "boolean", "description": "An output stream was longer than output_limit bytes and was cut."},
        "output_limit": {"type": "integer"},
        "timed_out": {"type": "boolean"},
        "duration_ms": {"type": "integer"},
        "verdict": {"type": "string", "description": "allow, or ask when a person approved it."}
    })
}

fn sandbox_output() -> Value {
    json!({"sandbox": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "Pass it as `sandbox` to the other tools."},
            "workspace": {"type": "string"},
            "preset": {"type": ["string", "null"]},
            "owner": {"type": "string"},
            "created_at": {"type": "integer"},
            "expires_at": {"type": "integer"},
            "last_used": {"type": "integer"}
        },
        "required": ["id", "workspace", "owner", "expires_at"]
    }})
}

fn approval_output() -> Value {
    json!({"approval": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["pending", "approved", "denied", "expired", "consumed"], "description": "approved: it runs now; consumed: it ran, see result."},
            "action": {"type": "object", "description": "The exact action a person decides on."},
            "action_hash": {"type": "string"},
            "reason": {"type": "string"},
            "sandbox": {"type": "string"},
            "requested_by": {"type": "string"},
            "decided_by": {"type": ["string", "null"]},
            "decision_reason": {"type": ["string", "null"]},
            "result": {"type": ["object", "null"], "description": "Once it ran: exec's result (exit_code, stdout, stderr...), or {\"error\": {\"code\", \"message\"}}."},
            "created_at": {"type": "integer"},
            "expires_at": {"type": "integer"},
            "decided_at": {"type": ["integer", "null"]},
            "url": {"type": "string"}
        },
        "required": ["id", "status", "action", "reason", "sandbox", "requested_by", "expires_at"]
    }})
}

/// Every tool, with its input and output schemas.
fn tools() -> Vec<Tool> {
    let files = ["ok", "denied"];
    let ann = |read_only: bool, destructive: bool| ToolAnnotations::new().read_only(read_only).destructive(destructive).open_world(false);
    vec![
        Tool::new("create_sandbox", "Make a sandbox to run commands and file calls in: a fresh empty workspace, or an existing directory the server allows. Returns its id.", Arc::new(JsonObject::new()))
            .with_input_schema::<CreateSandboxArgs>()
            .with_raw_output_schema(output_schema(&["ok"], sandbox_output()))
            .annotate(ann(false, false)),
        Tool::new(
            "exec",
            "Run a shell command in a sandbox's workspace, governed by the user's policy: it runs when the policy allows it, is refused (status denied) when it denies it, and waits for a person's approval (status approval_required) when it asks.",
            Arc::new(JsonObject::new()),
        )
        .with_input_schema::<ExecArgs>()
        .with_raw_output_schema(output_schema(&["ok", "denied", "approval_required"], exec_output()))
        .annotate(ann(false, true)),
        Tool::new("read_file", "Read a file beneath a sandbox's workspace. Text comes as `content`, other bytes as `content_base64`.", Arc::new(JsonObject::new()))
            .with_input_schema::<ReadArgs>()
            .with_raw_output_schema(output_schema(
                &files,
                json!({
                    "path": {"type": "string"},
                    "size": {"type": "integer", "description": "Bytes."},
                    "content": {"type": "string", "description": "The content, when it is UTF-8 text."},
                    "content_base64": {"type": "string", "description": "The content as base64, when it is not UTF-8 text."}
                }),
            ))
            .annotate(ann(true, false)),
        Tool::new("write_file", "Write a file beneath a sandbox's workspace (replacing it), as the policy allows.", Arc::new(JsonObject::new()))
            .with_input_schema::<WriteArgs>()
            .with_raw_output_schema(output_schema(&files, json!({"path": {"type": "string"}, "bytes": {"type": "integer", "description": "Bytes written."}})))
            .annotate(ann(false, true)),
        Tool::new("list_dir", "List a directory beneath a sandbox's workspace.", Arc::new(JsonObject::new()))
            .with_input_schema::<ListArgs>()
            .with_raw_output_schema(output_schema(
                &files,
                json!({
                    "path": {"type": "string"},
                    "entries": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "type": {"type": "string", "enum": ["file", "dir", "symlink", "other"]}, "size": {"type": "integer"}},
                        "required": ["name", "type", "size"]
                    }}
                }),
            ))
            .annotate(ann(true, false)),
        Tool::new(
            "approval_status",
            "The state of an approval an exec asked for; with wait_s, wait (up to 60 s) until a person decides and the action has run. Once consumed, `result` holds exec's result.",
            Arc::new(JsonObject::new()),
        )
        .with_input_schema::<ApprovalArgs>()
        .with_raw_output_schema(output_schema(&["ok"], approval_output()))
        .annotate(ann(true, false)),
    ]
}

fn ok(mut v: Value) -> CallToolResult {
    v["status"] = "ok".into();
    CallToolResult::structured(v)
}

fn denied(reason: String) -> CallToolResult {
    CallToolResult::structured_error(json!({"status": "denied", "reason": reason}))
}

fn approval_required(app: &App, a: &crate::db::Approval) -> CallToolResult {
    let mut v = api::pending_body(app, a);
    v["status"] = "approval_required".into();
    v["next"] = format!("Nothing ran yet: a person decides. Call approval_status with id `{}` (and wait_s up to 60) to learn the decision and, once it ran, the result.", a.id).into();
    CallToolResult::structured(v)
}

/// An [`ApiError`] as MCP: a denial is a tool result; the rest are JSON-RPC errors with the
/// REST API's code in `data.code`. An internal error's detail goes to the log only.
fn to_mcp(e: ApiError) -> Result<CallToolResult, ErrorData> {
    let data = Some(json!({"code": e.code()}));
    let message = e.to_string();
    Err(match e {
        ApiError::Denied(reason) => return Ok(denied(reason)),
        ApiError::BadRequest(_) | ApiError::BadPath(_) | ApiError::NotFound(_) | ApiError::TooLarge(_) => ErrorData::invalid_params(message, data),
        ApiError::Unauthorized | ApiError::Forbidden(_) | ApiError::SelfApproval | ApiError::Conflict(_) | ApiError::RateLimited | ApiError::Timeout | ApiError::BadHost | ApiError::BadOrigin => {
            ErrorData::invalid_request(message, data)
        }
        ApiError::Unrecorded | ApiError::Policy(_) => ErrorData::internal_error(message, data),
        ApiError::Internal(detail) => {
            crate::log(&format!("internal error: {detail}"));
            ErrorData::internal_error(message, data)
        }
    })
}

fn args<T: DeserializeOwned>(a: Option<JsonObject>) -> Result<T, ErrorData> {
    serde_json::from_value(Value::Object(a.unwrap_or_default()))
        .map_err(|e| ErrorData::invalid_params(format!("the arguments are not what this tool takes: {e}"), Some(json!({"code": "bad_request"}))))
}

impl Tools {
    async fn create_sandbox(&self, actor: &Actor, a: CreateSandboxArgs) -> Result<CallToolResult, ApiError> {
        let sb = api::new_sandbox(&self.app, actor, a.workspace, a.preset, a.ttl_s, a.backend)?;
        Ok(ok(json!({"sandbox": api::sandbox_view(&sb)})))
    }

    async fn exec(&self, actor: &Actor, a: ExecArgs) -> Result<CallToolResult, ApiError> {
        let sb = api::visible_sandbox(&self.app, actor, &a.sandbox)?;
        let text = api::exec_text(a.command, a.argv)?;
        let action = Action::Exec { text, stdin: a.stdin, timeout_s: a.timeout_s.unwrap_or(self.app.opts.default_timeout_s) };
        match govern::govern(&self.app, actor, &sb, action, None, None).await? {
            Governed::Ran { output, verdict } => Ok(ok(api::exec_body(&output, verdict))),
            Governed::Pending(ap) => Ok(approval_required(&self.app, &ap)),
            _ => Err(ApiError::internal("exec gave no run")),
        }
    }

    async fn read_file(&self, actor: &Actor, a: ReadArgs) -> Result<CallToolResult, ApiError> {
        let sb = api::visible_sandbox(&self.app, actor, &a.sandbox)?;
        match govern::govern(&self.app, actor, &sb, Action::Read { path: a.path.clone() }, None, None).await? {
            Governed::Bytes(b) => {
                let size = b.len();
                Ok(ok(match String::from_utf8(b) {
                    Ok(text) => json!({"path": a.path, "size": size, "content": text}),
                    Err(e) => json!({"path": a.path, "size": size, "content_base64": B64.encode(e.into_bytes())}),
                }))
            }
            _ => Err(ApiError::internal("read gave no bytes")),
        }
    }

    async fn write_file(&self, actor: &Actor, a: WriteArgs) -> Result<CallToolResult, ApiError> {
        let sb = api::visible_sandbox(&self.app, actor, &a.sandbox)?;
        let bytes = match (a.content, a.content_base64) {
            (Some(text), None) => text.into_bytes(),
            (None, Some(b)) => B64.decode(b.trim()).map_err(|e| ApiError::BadRequest(format!("content_base64 is not base64: {e}")))?,
            _ => return Err(ApiError::BadRequest("give exactly one of `content` (text) or `content_base64`".into())),
        };
        if bytes.len() > self.app.opts.max_file {
            return Err(ApiError::TooLarge(self.app.opts.max_file));
        }
        let n = bytes.len();
        govern::govern(&self.app, actor, &sb, Action::Write { path: a.path.clone(), bytes }, None, None).await?;
        Ok(ok(json!({"path": a.path, "bytes": n})))
    }

    async fn list_dir(&self, actor: &Actor, a: ListArgs) -> Result<CallToolResult, ApiError> {
        let sb = api::visible_sandbox(&self.app, actor, &a.sandbox)?;
        let path = a.path.unwrap_or_default();
        match govern::govern(&self.app, actor, &sb, Action::List { path: path.clone() }, None, None).await? {
            Governed::Entries(e) => {
                let entries: Vec<Value> = e.iter().map(|(n, t, s)| json!({"name": n, "type": t, "size": s})).collect();
                Ok(ok(json!({"path": if path.is_empty() { "." } else { &path }, "entries": entries})))
            }
            _ => Err(ApiError::internal("list gave no entries")),
        }
    }

    async fn approval_status(&self, actor: &Actor, a: ApprovalArgs) -> Result<CallToolResult, ApiError> {
        let ap = api::wait_approval(&self.app, actor, &a.id, a.wait_s.unwrap_or(0)).await?;
        Ok(ok(json!({"approval": api::approval_view(&self.app, &ap)})))
    }
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("pinfold", env!("CARGO_PKG_VERSION")).with_title("pinfold serve"))
            .with_instructions(
                "Shell commands and file calls in sandboxes, governed by the user's pinfold policy. Make a sandbox with create_sandbox (or use an id you were given), \
                 then exec, read_file, write_file and list_dir in it. A result with status `denied` means the policy refuses it: nothing was done; do not retry it in another form. \
                 `approval_required` means a person decides: poll approval_status with the approval's id.",
            )
    }

    async fn list_tools(&self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResponse, ErrorData> {
        // Put there by `authenticate` for every request that reaches rmcp.
        let actor = context.extensions.get::<Parts>().and_then(|p| p.extensions.get::<Actor>()).cloned();
        let Some(actor) = actor else {
            return to_mcp(ApiError::Unauthorized).map(Into::into);
        };
        let a = request.arguments;
        let result = match request.name.as_ref() {
            "create_sandbox" => self.create_sandbox(&actor, args(a)?).await,
            "exec" => self.exec(&actor, args(a)?).await,
            "read_file" => self.read_file(&actor, args(a)?).await,
            "write_file" => self.write_file(&actor, args(a)?).await,
            "list_dir" => self.list_dir(&actor, args(a)?).await,
            "approval_status" => self.approval_status(&actor, args(a)?).await,
            other => return Err(ErrorData::invalid_params(format!("no tool named `{other}`"), Some(json!({"code": "not_found"})))),
        };
        result.or_else(to_mcp).map(Into::into)
    }
}
