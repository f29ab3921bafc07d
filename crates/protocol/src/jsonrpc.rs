//! JSON-RPC framing of `codex app-server`: one JSON object per line, no `"jsonrpc"` member.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Id of a request in either direction. Codex numbers its own requests from 0; we use integers
/// too, but a peer may use strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Integer(i64),
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Integer(i) => write!(f, "{i}"),
            RequestId::String(s) => write!(f, "{s}"),
        }
    }
}

/// The error member of a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// Codex answers this when it is busy; the request may be retried.
    pub const OVERLOADED: i64 = -32001;
    /// Codex uses this for unknown methods and for requests sent before `initialize`.
    pub const INVALID_REQUEST: i64 = -32600;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;

    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn is_overloaded(&self) -> bool {
        self.code == Self::OVERLOADED
    }
}

/// One line received from the peer, classified by which members it carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming<'a> {
    /// `{id, method, params?}`: the peer asks us something and waits for an answer.
    Request {
        id: RequestId,
        method: String,
        params: Params<'a>,
    },
    /// `{method, params?}`: fire-and-forget.
    Notification { method: String, params: Params<'a> },
    /// `{id, result}`.
    Response { id: RequestId, result: Value },
    /// `{id, error}`.
    Error {
        id: Option<RequestId>,
        error: RpcError,
    },
}

/// The `params` of an incoming message, still as JSON text (borrowed from the line when it
/// can be): typed readers parse it once, straight into their own types.
#[derive(Debug, Clone, Default)]
pub struct Params<'a>(Option<Cow<'a, RawValue>>);

impl PartialEq for Params<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl Params<'_> {
    /// The JSON text (`null` when absent).
    pub fn text(&self) -> &str {
        self.0.as_deref().map(RawValue::get).unwrap_or("null")
    }

    /// Parses into `T`, or `None` when the shape does not fit.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        self.try_parse().ok()
    }

    /// Parses into `T`; the error says which member is missing or of the wrong type.
    pub fn try_parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.text())
    }

    /// The params as a JSON value (`Null` when absent).
    pub fn value(&self) -> Value {
        serde_json::from_str(self.text()).unwrap_or(Value::Null)
    }
}

impl From<Value> for Params<'static> {
    fn from(v: Value) -> Self {
        Params(serde_json::value::to_raw_value(&v).ok().map(Cow::Owned))
    }
}

/// The params of a known method that do not have the shape it needs (the message is then kept
/// raw, as an unknown one, and this says why).
#[derive(Debug, thiserror::Error)]
#[error("the params of {method} do not fit its type: {reason}")]
pub struct ParamsError {
    pub method: String,
    pub reason: serde_json::Error,
}

/// Why a line could not be understood as a JSON-RPC message.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("line is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("line is JSON but not a JSON-RPC object: {0}")]
    Shape(&'static str),
}

#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

impl<'a> Incoming<'a> {
    /// Parses one line. Extra members (such as Codex's `emittedAtMs`) are ignored; the params
    /// stay borrowed from the line.
    pub fn parse(line: &'a str) -> Result<Self, FrameError> {
        // serde reads a struct from an array too (`[1]` would be a response to id 1).
        if !line.trim_start().starts_with('{') {
            serde_json::from_str::<serde::de::IgnoredAny>(line)?;
            return Err(FrameError::Shape("not a JSON object"));
        }
        let raw: RawMessage = serde_json::from_str(line)?;
        let id = match raw.id {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                serde_json::from_value::<RequestId>(v)
                    .map_err(|_| FrameError::Shape("id is neither an integer nor a string"))?,
            ),
        };
        let params = Params(raw.params.map(Cow::Borrowed));
        let method = raw.method.map(Cow::into_owned);
        match (id, method, raw.result, raw.error) {
            (Some(id), Some(method), _, _) => Ok(Incoming::Request { id, method, params }),
            (None, Some(method), _, _) => Ok(Incoming::Notification { method, params }),
            (id, None, _, Some(error)) => Ok(Incoming::Error { id, error }),
            (Some(id), None, Some(result), None) => Ok(Incoming::Response { id, result }),
            (Some(id), None, None, None) => Ok(Incoming::Response {
                id,
                result: Value::Null,
            }),
            (None, None, _, None) => Err(FrameError::Shape("no method, id or error")),
        }
    }
}

/// A request we send: `{id, method, params}`.
#[derive(Debug, Serialize)]
pub struct OutgoingRequest<'a, P: Serialize> {
    pub id: &'a RequestId,
    pub method: &'a str,
    pub params: &'a P,
}

/// A notification we send: `{method, params?}`.
#[derive(Debug, Serialize)]
pub struct OutgoingNotification<'a, P: Serialize> {
    pub method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<&'a P>,
}

/// Our answer to a server request: `{id, result}` or `{id, error}`.
#[derive(Debug, Serialize)]
pub struct OutgoingResponse<'a> {
    pub id: &'a RequestId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a RpcError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_each_shape_and_ignores_extra_members() {
        let n = Incoming::parse(
            r#"{"method":"turn/started","params":{"threadId":"t"},"emittedAtMs":5}"#,
        )
        .unwrap();
        assert!(matches!(n, Incoming::Notification { ref method, .. } if method == "turn/started"));
        let r = Incoming::parse(r#"{"id":0,"method":"item/tool/call","params":{}}"#).unwrap();
        assert!(matches!(
            r,
            Incoming::Request {
                id: RequestId::Integer(0),
                ..
            }
        ));
        let ok = Incoming::parse(r#"{"id":"a","result":{"x":1}}"#).unwrap();
        assert!(matches!(ok, Incoming::Response { id: RequestId::String(ref s), .. } if s == "a"));
        let err = Incoming::parse(
            r#"{"id":3,"error":{"code":-32001,"message":"Server overloaded; retry later."}}"#,
        )
        .unwrap();
        match err {
            Incoming::Error { id, error } => {
                assert_eq!(id, Some(RequestId::Integer(3)));
                assert!(error.is_overloaded());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn rejects_junk_with_a_reason() {
        assert!(matches!(
            Incoming::parse("not json"),
            Err(FrameError::Json(_))
        ));
        assert!(matches!(
            Incoming::parse("[1,2]"),
            Err(FrameError::Shape("not a JSON object"))
        ));
        assert!(matches!(
            Incoming::parse(r#"{"foo":1}"#),
            Err(FrameError::Shape(_))
        ));
        assert!(matches!(
            Incoming::parse(r#"{"id":{"a":1},"result":1}"#),
            Err(FrameError::Shape(_))
        ));
    }

    #[test]
    fn outgoing_request_has_no_jsonrpc_member() {
        let id = RequestId::Integer(7);
        let line = serde_json::to_string(&OutgoingRequest {
            id: &id,
            method: "model/list",
            params: &serde_json::json!({}),
        })
        .unwrap();
        assert_eq!(line, r#"{"id":7,"method":"model/list","params":{}}"#);
    }
}
