//! The server's one error type. Every variant maps to one HTTP status and one stable `code`
//! (the match in [`ApiError::status`] is exhaustive), and to an MCP error the same way. An
//! internal error's detail goes to the server's log, never into a response.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Every error answer's body: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// The stable, machine-readable code: unauthorized, forbidden, self_approval, denied,
    /// bad_path, bad_request, not_found, conflict, too_large, rate_limited, bad_host,
    /// bad_origin, unrecorded, policy_error, internal, method_not_allowed.
    #[schema(example = "not_found")]
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: &str, message: impl Into<String>) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: code.to_string(), message: message.into() } }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No token, or one the server does not know.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// The token's role may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// An operator tried to decide their own request.
    #[error("an approval is decided by someone other than who asked for it")]
    SelfApproval,
    /// The policy denies the action.
    #[error("{0}")]
    Denied(String),
    /// A path that leaves the workspace, or one the server cannot reach beneath it.
    #[error("{0}")]
    BadPath(String),
    /// The request is malformed: what is wrong with it.
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// The thing is not in a state that allows this (an approval already decided).
    #[error("{0}")]
    Conflict(String),
    #[error("the request body is larger than {0} bytes")]
    TooLarge(usize),
    #[error("too many requests; slow down")]
    RateLimited,
    /// The request's body did not arrive in time.
    #[error("the request body did not arrive in time")]
    Timeout,
    /// The Host header names a host this server does not answer for (DNS rebinding).
    #[error("this server does not answer for that Host")]
    BadHost,
    /// A state-changing request from a page of another origin.
    #[error("cross-origin requests may not change state")]
    BadOrigin,
    /// The decision or the run cannot be recorded in the ledger, so nothing happened.
    #[error("the audit ledger cannot be written, so nothing was done")]
    Unrecorded,
    /// The policy that governs the workspace does not load: a configuration problem the
    /// user fixes (its message names the file and line), so 409, not a server fault.
    #[error("the policy for this workspace does not load: {0}")]
    Policy(String),
    /// Anything else: logged with its detail, answered without it.
    #[error("internal error")]
    Internal(String),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::SelfApproval | ApiError::Denied(_) | ApiError::BadHost | ApiError::BadOrigin => StatusCode::FORBIDDEN,
            ApiError::BadPath(_) | ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) | ApiError::Policy(_) => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Timeout => StatusCode::REQUEST_TIMEOUT,
            ApiError::Unrecorded => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::SelfApproval => "self_approval",
            ApiError::Denied(_) => "denied",
            ApiError::BadPath(_) => "bad_path",
            ApiError::BadRequest(_) => "bad_request",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::TooLarge(_) => "too_large",
            ApiError::RateLimited => "rate_limited",
            ApiError::Timeout => "timeout",
            ApiError::BadHost => "bad_host",
            ApiError::BadOrigin => "bad_origin",
            ApiError::Unrecorded => "unrecorded",
            ApiError::Policy(_) => "policy_error",
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn internal(what: impl std::fmt::Display) -> ApiError {
        ApiError::Internal(what.to_string())
    }

    /// The error's body.
    pub fn error_body(&self) -> ErrorBody {
        ErrorBody::new(self.code(), self.to_string())
    }

    /// The JSON body: `{"error": {"code", "message"}}`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!(self.error_body())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(detail) = &self {
            crate::log(&format!("internal error: {detail}"));
        }
        let mut r = (self.status(), axum::Json(self.error_body())).into_response();
        if matches!(self, ApiError::Unauthorized) {
            r.headers_mut().insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer"));
        }
        r
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(e: rusqlite::Error) -> ApiError {
        ApiError::internal(format!("database: {e}"))
    }
}
