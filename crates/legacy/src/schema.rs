//! The legacy tool list: `codex` and `codex-reply` with the input and output schemas the
//! legacy `codex mcp-server` advertised (kebab-case options; reply by `threadId` or the older
//! `conversationId`).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

pub const CODEX: &str = "codex";
pub const REPLY: &str = "codex-reply";

fn object(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(o) => Arc::new(o),
        _ => Arc::new(JsonObject::new()),
    }
}

/// `{threadId, content}`: what both tools return as structured content.
fn output_schema() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {"threadId": {"type": "string"}, "content": {"type": "string"}},
        "required": ["threadId", "content"]
    }))
}

fn text(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// The two legacy tools, in the legacy order.
pub fn definitions() -> Vec<Tool> {
    let codex = json!({
        "type": "object",
        "properties": {
            "prompt": text("The first message of the new Codex session (the task)."),
            "approval-policy": {
                "type": "string",
                "enum": ["untrusted", "on-failure", "on-request", "never"],
                "description": "When Codex stops to ask before running a command. `on-failure` only exists before Codex 0.153; newer Codex gets `on-request`."
            },
            "sandbox": {
                "type": "string",
                "enum": ["read-only", "workspace-write", "danger-full-access"],
                "description": "What model-generated commands may touch."
            },
            "cwd": text("Working directory of the session; relative paths are resolved against the server's directory."),
            "model": text("Model override."),
            "profile": text("A profile of Codex's config.toml to take defaults from."),
            "config": {
                "type": "object",
                "additionalProperties": true,
                "description": "Codex config overrides (like `codex -c key=value`)."
            },
            "base-instructions": text("Instructions used instead of Codex's default ones."),
            "developer-instructions": text("Instructions added as a developer message."),
            "compact-prompt": text("The prompt Codex uses when it compacts the conversation.")
        },
        "required": ["prompt"]
    });
    let reply = json!({
        "type": "object",
        "properties": {
            "prompt": text("The next message of the session."),
            "threadId": text("The session's thread id (from the `codex` result)."),
            "conversationId": text("Older name of threadId, still accepted.")
        },
        "required": ["prompt"]
    });
    vec![
        Tool::new(
            CODEX,
            "Start a Codex session on a task; returns when the turn ends, with the thread id and the final message. Progress arrives as codex/event notifications; approvals as elicitation requests.",
            object(codex),
        )
        .with_title("Codex")
        .with_raw_output_schema(output_schema()),
        Tool::new(
            REPLY,
            "Continue a Codex session (by threadId) with another message; returns when the turn ends.",
            object(reply),
        )
        .with_title("Codex Reply")
        .with_raw_output_schema(output_schema()),
    ]
}
