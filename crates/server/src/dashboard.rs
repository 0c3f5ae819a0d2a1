//! The dashboard: a page the binary serves (no CDN, no build step: three files compiled in),
//! which signs an operator in with their token and then uses the same REST API as everyone
//! else, authenticated by a session cookie (HttpOnly, SameSite=Strict; the session's hash is
//! what the database keeps). A state-changing request made with the cookie must carry the
//! server's own Origin, which browsers send on every such request.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::db::{self, Actor, Role};
use crate::error::ApiError;
use crate::App;

const INDEX: &str = include_str!("dashboard/index.html");
const APP_JS: &str = include_str!("dashboard/app.js");
const APP_CSS: &str = include_str!("dashboard/app.css");

/// The session cookie's name.
pub const COOKIE: &str = "pinfold_session";
/// How long a sign-in lasts.
pub const SESSION_S: i64 = 12 * 3600;

/// The page may load only its own script and style, talk only to this server, and be framed
/// by nobody.
const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub fn routes() -> Router<App> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard") }))
        .route("/dashboard", get(|| async { page(INDEX, "text/html; charset=utf-8") }))
        .route("/dashboard/app.js", get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }))
        .route("/dashboard/app.css", get(|| async { page(APP_CSS, "text/css; charset=utf-8") }))
        .route("/dashboard/login", post(login))
        .route("/dashboard/logout", post(logout))
        .route("/dashboard/me", get(me))
}

fn page(body: &'static str, kind: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut().insert("content-type", HeaderValue::from_static(kind));
    r.headers_mut().insert("content-security-policy", HeaderValue::from_static(PAGE_CSP));
    r
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    token: String,
}

async fn login(State(app): State<App>, body: Body) -> Result<Response, ApiError> {
    let bytes = crate::api::body_within(body, 4096).await?;
    let req: Login = serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("the body is not {{\"token\": …}}: {e}")))?;
    let hash = crate::token_hash(req.token.trim());
    if !app.limiter.allow(&format!("t:{hash}")) {
        return Err(ApiError::RateLimited);
    }
    let actor = db::actor_by_hash(&app.db(), &hash)?.ok_or(ApiError::Unauthorized)?;
    if actor.role != Role::Operator {
        return Err(ApiError::Forbidden("the dashboard is for operator tokens".into()));
    }
    let session = format!("pfs_{}", crate::random_hex(32));
    db::add_session(&app.db(), &crate::token_hash(&session), &actor.name, db::now() + SESSION_S)?;
    let cookie = format!("{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_S}");
    let mut r = Json(json!({"name": actor.name, "role": actor.role.as_str()})).into_response();
    r.headers_mut().insert("set-cookie", HeaderValue::from_str(&cookie).map_err(ApiError::internal)?);
    Ok(r)
}

async fn logout(State(app): State<App>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(s) = session_cookie(&headers) {
        db::remove_session(&app.db(), &crate::token_hash(s))?;
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert("set-cookie", HeaderValue::from_str(&format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")).map_err(ApiError::internal)?);
    Ok(r)
}

async fn me(actor: Actor) -> Json<serde_json::Value> {
    Json(json!({"name": actor.name, "role": actor.role.as_str()}))
}

/// The session id from the request's cookies.
pub fn session_cookie(h: &HeaderMap) -> Option<&str> {
    h.get_all("cookie").iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == COOKIE && !v.is_empty()).then_some(v)
    })
}

/// The operator a session cookie belongs to.
pub fn actor_by_session(app: &App, session: &str) -> Result<Option<Actor>, ApiError> {
    Ok(db::session_actor(&app.db(), &crate::token_hash(session), db::now())?)
}
