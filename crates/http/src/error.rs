//! Errors as the API shows them: `{"error":{"code","message"}}` with the status that fits,
//! and a JSON body extractor whose rejections take the same shape.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use codex_relay_core::RelayError;
use codex_relay_core::links::LinkError;
use codex_relay_core::rules::RuleError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::ToSchema;

/// An API error: a status, a snake_case code and a message that says what to do.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// The error body every endpoint uses.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// e.g. `unknown_session`, `already_resolved`, `unauthorized`, `payload_too_large`.
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<RelayError> for ApiError {
    fn from(e: RelayError) -> Self {
        let message = e.to_string();
        let (status, code) = match &e {
            RelayError::UnknownSession(_) => (StatusCode::NOT_FOUND, "unknown_session"),
            RelayError::UnknownRequest { .. } => (StatusCode::NOT_FOUND, "unknown_request"),
            RelayError::AlreadyResolved { .. } => (StatusCode::CONFLICT, "already_resolved"),
            RelayError::InvalidAnswer { .. } => {
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid_answer")
            }
            RelayError::InvalidOption(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_option"),
            RelayError::Busy(_) => (StatusCode::CONFLICT, "session_busy"),
            RelayError::Unsupported(_) => (StatusCode::NOT_IMPLEMENTED, "unsupported_by_codex"),
            RelayError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden_option"),
            RelayError::TooManySessions { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "too_many_sessions")
            }
            RelayError::Closed(_) => (StatusCode::CONFLICT, "session_closed"),
            RelayError::BudgetReached { .. } => (StatusCode::CONFLICT, "budget_reached"),
            RelayError::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            RelayError::Worktree(_) => (StatusCode::UNPROCESSABLE_ENTITY, "worktree_failed"),
            RelayError::Start(_) => (StatusCode::SERVICE_UNAVAILABLE, "codex_unavailable"),
            RelayError::CodexCrashLoop { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "codex_crash_loop")
            }
            RelayError::Codex(_) => (StatusCode::BAD_GATEWAY, "codex_error"),
            RelayError::Auth(_) => (StatusCode::BAD_GATEWAY, "codex_auth_failed"),
            RelayError::NotLoggedIn(_) => (StatusCode::SERVICE_UNAVAILABLE, "codex_not_logged_in"),
            RelayError::Workspace(_) => (StatusCode::UNPROCESSABLE_ENTITY, "workspace_refused"),
            RelayError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            RelayError::Rule(r) => match r {
                RuleError::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_rule"),
                RuleError::Unknown(_) => (StatusCode::NOT_FOUND, "unknown_rule"),
                RuleError::FromFile(_) => (StatusCode::CONFLICT, "rule_from_file"),
                RuleError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
            },
            RelayError::AnswerLink(l) => link_status(l),
            RelayError::Owner { .. } => (StatusCode::SERVICE_UNAVAILABLE, "owner_unreachable"),
            RelayError::Unavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "instance_unavailable")
            }
            RelayError::ActiveWriter { .. } => (StatusCode::CONFLICT, "active_writer"),
            // An error another instance of the cluster returned: the status its code has here.
            RelayError::Remote { code, .. } => remote(code),
        };
        Self::new(status, code, message)
    }
}

/// The status and code of an answer link that does not answer.
pub fn link_status(e: &LinkError) -> (StatusCode, &'static str) {
    match e {
        LinkError::Invalid | LinkError::OtherRequest => (StatusCode::FORBIDDEN, "invalid_link"),
        LinkError::Expired => (StatusCode::GONE, "link_expired"),
        LinkError::Used => (StatusCode::GONE, "link_used"),
        LinkError::AlreadyAnswered { .. } => (StatusCode::CONFLICT, "already_resolved"),
        LinkError::Gone => (StatusCode::GONE, "request_gone"),
        LinkError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
        LinkError::NotTaken(_) => (StatusCode::SERVICE_UNAVAILABLE, "answer_not_taken"),
    }
}

/// The status and code of an error another instance returned (of a kind that crosses as text).
fn remote(code: &str) -> (StatusCode, &'static str) {
    match code {
        "codex_error" => (StatusCode::BAD_GATEWAY, "codex_error"),
        "codex_auth_failed" => (StatusCode::BAD_GATEWAY, "codex_auth_failed"),
        "codex_not_logged_in" => (StatusCode::SERVICE_UNAVAILABLE, "codex_not_logged_in"),
        "workspace_refused" => (StatusCode::UNPROCESSABLE_ENTITY, "workspace_refused"),
        "codex_unavailable" => (StatusCode::SERVICE_UNAVAILABLE, "codex_unavailable"),
        "codex_crash_loop" => (StatusCode::SERVICE_UNAVAILABLE, "codex_crash_loop"),
        "store_unavailable" => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
        "owner_unreachable" => (StatusCode::SERVICE_UNAVAILABLE, "owner_unreachable"),
        "instance_unavailable" => (StatusCode::SERVICE_UNAVAILABLE, "instance_unavailable"),
        "active_writer" => (StatusCode::CONFLICT, "active_writer"),
        _ => (StatusCode::BAD_GATEWAY, "remote_error"),
    }
}

/// `axum::Json`, with rejections in the API's error shape: malformed JSON → 400, a body of the
/// wrong shape → 422, too large → 413, not JSON → 415.
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(rejection) => Err(rejected(rejection)),
        }
    }
}

fn rejected(r: JsonRejection) -> ApiError {
    let status = r.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_body",
        _ => "bad_json",
    };
    ApiError::new(status, code, r.body_text())
}
