//! JSONL events of `codex exec --json` (one per stdout line).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Cumulative token usage of an exec thread (`turn.completed.usage` is a running total).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecUsage {
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub output_tokens: i64,
}

/// One event line. Unknown event types, and known ones that do not parse, are kept raw.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecEvent {
    ThreadStarted {
        thread_id: String,
    },
    TurnStarted,
    ItemStarted {
        item: Value,
    },
    ItemUpdated {
        item: Value,
    },
    ItemCompleted {
        item: Value,
    },
    TurnCompleted {
        usage: ExecUsage,
    },
    TurnFailed {
        error: Value,
    },
    /// A notice such as a retry; not the end of the turn.
    Error {
        message: String,
    },
    Unknown(Value),
}

impl ExecEvent {
    /// Parses one line; `Err` only when the line is not JSON at all.
    pub fn parse(line: &str) -> Result<Self, serde_json::Error> {
        let v: Value = serde_json::from_str(line)?;
        Ok(Self::from_value(v))
    }

    pub fn from_value(v: Value) -> Self {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let field = |k: &str| v.get(k).cloned();
        let parsed = match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "thread.started" => {
                s("thread_id").map(|thread_id| ExecEvent::ThreadStarted { thread_id })
            }
            "turn.started" => Some(ExecEvent::TurnStarted),
            "item.started" => field("item").map(|item| ExecEvent::ItemStarted { item }),
            "item.updated" => field("item").map(|item| ExecEvent::ItemUpdated { item }),
            "item.completed" => field("item").map(|item| ExecEvent::ItemCompleted { item }),
            "turn.completed" => Some(ExecEvent::TurnCompleted {
                usage: field("usage")
                    .and_then(|u| serde_json::from_value(u).ok())
                    .unwrap_or_default(),
            }),
            "turn.failed" => Some(ExecEvent::TurnFailed {
                error: field("error").unwrap_or(Value::Null),
            }),
            "error" => s("message").map(|message| ExecEvent::Error { message }),
            _ => None,
        };
        parsed.unwrap_or(ExecEvent::Unknown(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_and_keeps_unknown() {
        assert_eq!(
            ExecEvent::parse(r#"{"type":"thread.started","thread_id":"abc"}"#).unwrap(),
            ExecEvent::ThreadStarted {
                thread_id: "abc".into()
            }
        );
        match ExecEvent::parse(
            r#"{"type":"turn.completed","usage":{"input_tokens":3,"output_tokens":2}}"#,
        )
        .unwrap()
        {
            ExecEvent::TurnCompleted { usage } => {
                assert_eq!((usage.input_tokens, usage.output_tokens), (3, 2))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            ExecEvent::parse(r#"{"type":"future.thing"}"#).unwrap(),
            ExecEvent::Unknown(_)
        ));
        assert!(ExecEvent::parse("nope").is_err());
    }
}
