//! The library's one error type: every failure carries the phase it happened in and what Codex said.

use std::fmt;

use codex_relay_codex::PeerError;
use codex_relay_core::RelayError;
use serde::Serialize;
use serde_json::Value;

/// Where a run failed. `codex-relay run` exits with [`Phase::exit_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The request could not be made or was refused: bad options, the store, authentication,
    /// a bad request, the context window, a model that does not exist.
    Request,
    /// The model answered, but not usably: output that does not parse into the schema's type,
    /// or a turn that failed on the model's side.
    Response,
    /// A tool failed in a way that ended the turn (Codex's sandbox, too many denials).
    Tool,
    /// A limit was hit: rate limit, usage limit, model capacity, or the run's deadline.
    Budget,
    /// Codex itself: it could not start, it died, or it broke the protocol.
    Codex,
}

impl Phase {
    /// The lowercase name (`request`, `response`, `tool`, `budget`, `codex`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Request => "request",
            Phase::Response => "response",
            Phase::Tool => "tool",
            Phase::Budget => "budget",
            Phase::Codex => "codex",
        }
    }

    /// The exit code `codex-relay run` uses for this phase (see docs/RUN.md): 3 request,
    /// 4 response, 5 tool, 6 budget, 7 codex.
    pub fn exit_code(self) -> u8 {
        match self {
            Phase::Request => 3,
            Phase::Response => 4,
            Phase::Tool => 5,
            Phase::Budget => 6,
            Phase::Codex => 7,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What went wrong, more precisely than the phase.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The run could not be set up (options, output type, store, session limit).
    Setup,
    /// Codex refused a call (`thread/start`, `turn/start`, `thread/resume`).
    Refused,
    /// The turn ended with status `failed`; see [`Error::codex_error_info`].
    TurnFailed,
    /// The final message did not parse into the requested type; see [`Error::raw_text`].
    InvalidOutput,
    /// The run's deadline passed. `stopped` says how the engine ended the turn: interrupted
    /// within the grace, or (when the interrupt did not land) its Codex process killed when the
    /// session had it to itself, else the session closed so the sessions sharing that process
    /// go on; `NotRunning` when the deadline passed before the turn started.
    Deadline {
        /// How the turn was ended.
        stopped: codex_relay_core::Stopped,
    },
    /// The turn produced no output for the idle time (the watchdog); `stopped` as for
    /// [`ErrorKind::Deadline`].
    Idle {
        /// How the turn was ended.
        stopped: codex_relay_core::Stopped,
    },
    /// The session reached a budget: the running turn was stopped (`stopped`), or, with
    /// `NotRunning`, no turn was started. Raise it with [`crate::Session::set_limits`].
    Budget {
        /// Which budget.
        budget: codex_relay_core::limits::BudgetKind,
        /// How the turn was ended.
        stopped: codex_relay_core::Stopped,
    },
    /// Someone else (another front, [`crate::Session::interrupt`]) interrupted the turn.
    Interrupted,
    /// Codex could not be started.
    Start,
    /// Codex exited, or the connection to it closed.
    Exited,
    /// Codex answered something unexpected, or did not answer in time.
    Protocol,
    /// A turn is already running in this session.
    Busy,
    /// The account's usage limit is reached: Codex failed the turn with `usageLimitExceeded`
    /// (see [`Error::codex_error_info`]; Codex's message says when it resets).
    UsageLimit,
    /// A rate limit is hit and the turn could not wait for it in the relay's queue (the queue
    /// was full, the limit resets later than a turn may wait, or it waited that long).
    RateLimited,
}

/// A failed run or call. `Display` gives one line; the accessors give everything Codex said.
/// (Boxed inside: a `Result<_, Error>` stays one pointer wide.)
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} error: {}", .0.phase, .0.message)]
pub struct Error(Box<Inner>);

#[derive(Debug, Clone)]
struct Inner {
    phase: Phase,
    kind: ErrorKind,
    message: String,
    raw_text: Option<String>,
    codex_error_info: Option<Value>,
    additional_details: Option<String>,
    raw_error: Option<Value>,
    stderr_tail: Option<String>,
    session_id: Option<String>,
    turn_id: Option<String>,
}

impl Error {
    /// A new error; the optional parts are added with the `with_*` methods.
    pub fn new(phase: Phase, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            phase,
            kind,
            message: message.into(),
            raw_text: None,
            codex_error_info: None,
            additional_details: None,
            raw_error: None,
            stderr_tail: None,
            session_id: None,
            turn_id: None,
        }))
    }

    pub(crate) fn setup(message: impl Into<String>) -> Self {
        Self::new(Phase::Request, ErrorKind::Setup, message)
    }

    /// The phase the run failed in.
    pub fn phase(&self) -> Phase {
        self.0.phase
    }

    /// The precise kind of failure.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// The one-line message (without the phase).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// For [`ErrorKind::InvalidOutput`]: the model's final message exactly as it came.
    pub fn raw_text(&self) -> Option<&str> {
        self.0.raw_text.as_deref()
    }

    /// Codex's `codexErrorInfo` for a failed turn (a string such as `"unauthorized"`, or an
    /// object such as `{"responseTooManyFailedAttempts": {"httpStatusCode": 429}}`).
    pub fn codex_error_info(&self) -> Option<&Value> {
        self.0.codex_error_info.as_ref()
    }

    /// Codex's `additionalDetails` for a failed turn.
    pub fn additional_details(&self) -> Option<&str> {
        self.0.additional_details.as_deref()
    }

    /// The whole error object Codex sent (`turn/completed`'s `turn.error`, or an `error`
    /// notification's `error`).
    pub fn raw_error(&self) -> Option<&Value> {
        self.0.raw_error.as_ref()
    }

    /// The last lines Codex wrote to stderr (bounded), when known.
    pub fn stderr_tail(&self) -> Option<&str> {
        self.0.stderr_tail.as_deref()
    }

    /// The session (Codex thread) the error happened in, when there was one.
    pub fn session_id(&self) -> Option<&str> {
        self.0.session_id.as_deref()
    }

    /// The turn the error happened in, when there was one.
    pub fn turn_id(&self) -> Option<&str> {
        self.0.turn_id.as_deref()
    }

    /// Attaches the model's raw final message.
    pub fn with_raw_text(mut self, text: impl Into<String>) -> Self {
        self.0.raw_text = Some(text.into());
        self
    }

    /// Attaches Codex's stderr tail (ignored when empty).
    pub fn with_stderr_tail(mut self, tail: impl Into<String>) -> Self {
        let tail = tail.into();
        if !tail.trim().is_empty() {
            self.0.stderr_tail = Some(tail);
        }
        self
    }

    /// Attaches Codex's error object: `codexErrorInfo` and `additionalDetails` are read from it.
    pub fn with_raw_error(mut self, raw: Value) -> Self {
        self.0.codex_error_info = raw.get("codexErrorInfo").filter(|v| !v.is_null()).cloned();
        self.0.additional_details = raw
            .get("additionalDetails")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.0.raw_error = Some(raw);
        self
    }

    pub(crate) fn in_turn(mut self, session: &str, turn: Option<&str>) -> Self {
        self.0.session_id = Some(session.to_owned());
        self.0.turn_id = turn.map(str::to_owned);
        self
    }

    /// The error for a turn that ended `failed` with Codex's error object `raw` (may be
    /// `Null` when Codex gave none): the phase comes from `codexErrorInfo`.
    pub fn turn_failed(raw: Value, fallback_message: Option<&str>) -> Self {
        let message = raw
            .get("message")
            .and_then(Value::as_str)
            .or(fallback_message)
            .unwrap_or("the turn failed")
            .to_owned();
        // Codex 0.98 says `other` for HTTP failures (a 401 among them); the message names the
        // status then.
        let phase = match raw.get("codexErrorInfo").filter(|v| !v.is_null()) {
            Some(info) if info != "other" => phase_of_error_info(info),
            _ => phase_of_message(&message),
        };
        let usage_limit = raw
            .get("codexErrorInfo")
            .is_some_and(|i| i == "usageLimitExceeded" || i == "usage_limit_exceeded");
        let kind = if usage_limit {
            ErrorKind::UsageLimit
        } else {
            ErrorKind::TurnFailed
        };
        let err = Self::new(phase, kind, message);
        if raw.is_null() {
            err
        } else {
            err.with_raw_error(raw)
        }
    }
}

/// Maps Codex's `codexErrorInfo` (camelCase in the v2 protocol, snake_case in older
/// servers) to a phase, as reference 002 does, with HTTP 429 counted as `budget`.
pub fn phase_of_error_info(info: &Value) -> Phase {
    let (name, body) = match info {
        Value::String(s) => (s.as_str(), &Value::Null),
        Value::Object(m) => match m.iter().next() {
            Some((k, v)) => (k.as_str(), v),
            None => return Phase::Response,
        },
        _ => return Phase::Response,
    };
    let status = body
        .get("httpStatusCode")
        .or_else(|| body.get("http_status_code"))
        .and_then(Value::as_u64);
    use codex_relay_protocol::v2::surface::{ErrorClass, error_class};
    match error_class(name) {
        Some(ErrorClass::Budget) => Phase::Budget,
        Some(ErrorClass::RequestUnless429) if status == Some(429) => Phase::Budget,
        Some(ErrorClass::Request | ErrorClass::RequestUnless429) => Phase::Request,
        Some(ErrorClass::Tool) => Phase::Tool,
        // internalServerError, threadRollbackFailed, other, and kinds newer than this crate.
        Some(ErrorClass::Response) | None => Phase::Response,
    }
}

/// The phase of a failure Codex gave no specific `codexErrorInfo` for, from the HTTP status
/// its message names (`unexpected status 401 Unauthorized: ...`).
fn phase_of_message(message: &str) -> Phase {
    let m = message.to_ascii_lowercase();
    // The status Codex names (`unexpected status 401 Unauthorized`) decides; the bare digits
    // elsewhere in the message (a port in its URL: `127.0.0.1:42931`) do not.
    let named = m.split("status ").skip(1).find_map(|rest| {
        let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
        code.parse::<u16>().ok()
    });
    match named {
        Some(429) => return Phase::Budget,
        Some(400 | 401 | 403 | 404) => return Phase::Request,
        _ => {}
    }
    let budget = [
        "429 too many requests",
        "too many requests",
        "rate limit",
        "usage limit",
        "quota",
    ];
    let request = [
        "401 unauthorized",
        "403 forbidden",
        "400 bad request",
        "404 not found",
        "status 401",
        "status 403",
        "status 400",
        "status 404",
        "context window",
    ];
    if budget.iter().any(|b| m.contains(b)) {
        Phase::Budget
    } else if request.iter().any(|r| m.contains(r)) {
        Phase::Request
    } else {
        Phase::Response
    }
}

impl From<RelayError> for Error {
    fn from(e: RelayError) -> Self {
        let message = e.to_string();
        match e {
            RelayError::Start(_) | RelayError::CodexCrashLoop { .. } => {
                Error::new(Phase::Codex, ErrorKind::Start, message)
            }
            // Another instance of the cluster runs the session and did not answer, or failed.
            RelayError::Owner { .. }
            | RelayError::Unavailable { .. }
            | RelayError::Remote { .. } => Error::new(Phase::Codex, ErrorKind::Start, message),
            RelayError::Codex(p) => Error::from(p),
            RelayError::Auth(_) | RelayError::NotLoggedIn(_) | RelayError::Forbidden(_) => {
                Error::new(Phase::Request, ErrorKind::Refused, message)
            }
            RelayError::UnknownSession(_)
            | RelayError::Workspace(_)
            | RelayError::Worktree(_)
            | RelayError::InvalidOption(_)
            | RelayError::TooManySessions { .. }
            | RelayError::Store(_)
            | RelayError::Rule(_) => Error::setup(message),
            RelayError::AnswerLink(_) => Error::new(Phase::Request, ErrorKind::Refused, message),
            RelayError::Closed(_) | RelayError::Unsupported(_) => {
                Error::new(Phase::Request, ErrorKind::Setup, message)
            }
            RelayError::Busy(_) | RelayError::ActiveWriter { .. } => {
                Error::new(Phase::Request, ErrorKind::Refused, message)
            }
            RelayError::BudgetReached { reason, .. } => {
                let budget = match reason {
                    codex_relay_core::limits::StopReason::Budget { budget, .. } => budget,
                    _ => codex_relay_core::limits::BudgetKind::Turns,
                };
                Error::new(
                    Phase::Budget,
                    ErrorKind::Budget {
                        budget,
                        stopped: codex_relay_core::Stopped::NotRunning,
                    },
                    message,
                )
            }
            RelayError::RateLimited { .. } => {
                Error::new(Phase::Budget, ErrorKind::RateLimited, message)
            }
            RelayError::UnknownRequest { .. }
            | RelayError::AlreadyResolved { .. }
            | RelayError::InvalidAnswer { .. } => {
                Error::new(Phase::Codex, ErrorKind::Protocol, message)
            }
        }
    }
}

impl From<PeerError> for Error {
    fn from(e: PeerError) -> Self {
        let message = e.to_string();
        match e {
            PeerError::Exited { stderr_tail, .. } => {
                Error::new(Phase::Codex, ErrorKind::Exited, message).with_stderr_tail(stderr_tail)
            }
            PeerError::Disconnected(_) | PeerError::Shutdown => {
                Error::new(Phase::Codex, ErrorKind::Exited, message)
            }
            PeerError::Rpc { .. } => Error::new(Phase::Request, ErrorKind::Refused, message),
            PeerError::Timeout { .. }
            | PeerError::Overloaded { .. }
            | PeerError::Unsupported { .. }
            | PeerError::Decode { .. }
            | PeerError::Encode { .. } => Error::new(Phase::Codex, ErrorKind::Protocol, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_info_maps_to_phases_in_both_spellings() {
        let cases = [
            (json!("unauthorized"), Phase::Request),
            (json!("bad_request"), Phase::Request),
            (json!("contextWindowExceeded"), Phase::Request),
            (json!("usageLimitExceeded"), Phase::Budget),
            // A safety policy refused the request (0.171 adds `bioPolicy` beside `cyberPolicy`):
            // asking again the same way does not help.
            (json!("cyberPolicy"), Phase::Request),
            (json!("bioPolicy"), Phase::Request),
            (json!("bio_policy"), Phase::Request),
            (json!({"model_cap": {"model": "m"}}), Phase::Budget),
            (
                json!({"responseTooManyFailedAttempts": {"httpStatusCode": 429}}),
                Phase::Budget,
            ),
            (
                json!({"responseTooManyFailedAttempts": {"httpStatusCode": 500}}),
                Phase::Request,
            ),
            (
                json!({"http_connection_failed": {"http_status_code": 401}}),
                Phase::Request,
            ),
            (json!("sandboxError"), Phase::Tool),
            (json!("internalServerError"), Phase::Response),
            (json!("somethingNew"), Phase::Response),
        ];
        for (info, phase) in cases {
            assert_eq!(phase_of_error_info(&info), phase, "{info}");
        }
    }

    #[test]
    fn a_failed_turn_keeps_what_codex_sent() {
        let raw = json!({"message": "bad key", "codexErrorInfo": "unauthorized", "additionalDetails": "401"});
        let e = Error::turn_failed(raw.clone(), None);
        assert_eq!(e.phase(), Phase::Request);
        assert_eq!(e.codex_error_info(), Some(&json!("unauthorized")));
        assert_eq!(e.additional_details(), Some("401"));
        assert_eq!(e.raw_error(), Some(&raw));
        assert_eq!(e.to_string(), "request error: bad key");
        // 0.98 says `other` for an HTTP 401; the message names the status.
        let old = json!({"message": "unexpected status 401 Unauthorized: bad key", "codexErrorInfo": "other"});
        assert_eq!(Error::turn_failed(old, None).phase(), Phase::Request);
        let other = json!({"message": "the model gave up", "codexErrorInfo": "other"});
        assert_eq!(Error::turn_failed(other, None).phase(), Phase::Response);
    }

    /// The digits of a port in the URL Codex quotes are not a status: a 401 from a model
    /// server on port 42931 is a request error, not a 429's budget error (the suite met it).
    #[test]
    fn a_port_in_the_message_is_not_a_status() {
        let at = |m: &str| json!({"message": m, "codexErrorInfo": "other"});
        let unauthorized = at(
            "unexpected status 401 Unauthorized: bad key, url: http://127.0.0.1:42931/v1/responses",
        );
        assert_eq!(
            Error::turn_failed(unauthorized, None).phase(),
            Phase::Request
        );
        let limited = at(
            "unexpected status 429 Too Many Requests: slow down, url: http://127.0.0.1:40101/v1/responses",
        );
        assert_eq!(Error::turn_failed(limited, None).phase(), Phase::Budget);
        let failed =
            at("unexpected status 500 Internal Server Error, url: http://127.0.0.1:4290/x");
        assert_eq!(Error::turn_failed(failed, None).phase(), Phase::Response);
    }

    /// The account's usage limit is its own kind (a budget-phase error), as Codex 0.171 and
    /// 0.169 send it (crates/codex/tests/all/real_rate_limits.rs).
    #[test]
    fn usage_limit_exceeded_is_reported_as_such() {
        let raw = json!({"message": "You've hit your usage limit.", "codexErrorInfo": "usageLimitExceeded"});
        let e = Error::turn_failed(raw, None);
        assert_eq!(e.kind(), &ErrorKind::UsageLimit);
        assert_eq!(e.phase(), Phase::Budget);
        let other = json!({"message": "bad key", "codexErrorInfo": "unauthorized"});
        assert_eq!(
            Error::turn_failed(other, None).kind(),
            &ErrorKind::TurnFailed
        );
    }
}
