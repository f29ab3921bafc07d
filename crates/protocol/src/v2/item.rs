//! Thread items: what a turn is made of (messages, commands, file changes, tool calls, ...).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Status shared by command, file-change and tool-call items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Failed,
    Declined,
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessageItem {
    pub id: String,
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessageItem {
    pub id: String,
    #[serde(default)]
    pub content: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningItem {
    pub id: String,
    #[serde(default)]
    pub summary: Vec<String>,
    #[serde(default)]
    pub content: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionItem {
    pub id: String,
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub cwd: Option<String>,
    pub status: ItemStatus,
    #[serde(default)]
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub aggregated_output: Option<String>,
    #[serde(default)]
    pub duration_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileUpdateChange {
    pub path: String,
    /// `{type: add|delete|update, move_path?}`.
    pub kind: Value,
    #[serde(default)]
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeItem {
    pub id: String,
    #[serde(default)]
    pub changes: Vec<FileUpdateChange>,
    pub status: ItemStatus,
}

/// A call of a caller-defined (dynamic) tool. Listed as an item from 0.169.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallItem {
    pub id: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    pub status: ItemStatus,
    #[serde(default)]
    pub success: Option<bool>,
    #[serde(default)]
    pub content_items: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallItem {
    pub id: String,
    pub server: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Value,
    pub status: ItemStatus,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<Value>,
}

/// A call of one of the sub-agent tools (`spawnAgent`, `sendInput`, `wait`, `closeAgent`, ...)
/// made by the model of `sender_thread_id`; for a spawn, `receiver_thread_ids` names the new
/// agent's thread once it exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollabAgentToolCallItem {
    pub id: String,
    pub tool: String,
    pub status: ItemStatus,
    #[serde(default)]
    pub sender_thread_id: String,
    #[serde(default)]
    pub receiver_thread_ids: Vec<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    /// Last known state of each target agent, by thread id: `{status, message?}`.
    #[serde(default)]
    pub agents_states: Value,
}

/// One item of a turn. Kinds this crate does not model, and known kinds whose shape it cannot
/// read, are kept whole in [`ThreadItem::Other`].
#[derive(Debug, Clone, PartialEq)]
pub enum ThreadItem {
    UserMessage(UserMessageItem),
    AgentMessage(AgentMessageItem),
    Reasoning(ReasoningItem),
    CommandExecution(CommandExecutionItem),
    FileChange(FileChangeItem),
    DynamicToolCall(DynamicToolCallItem),
    McpToolCall(McpToolCallItem),
    CollabAgentToolCall(CollabAgentToolCallItem),
    Other(Value),
}

impl ThreadItem {
    /// The item's `type` as Codex names it.
    pub fn kind(&self) -> &str {
        match self {
            ThreadItem::UserMessage(_) => "userMessage",
            ThreadItem::AgentMessage(_) => "agentMessage",
            ThreadItem::Reasoning(_) => "reasoning",
            ThreadItem::CommandExecution(_) => "commandExecution",
            ThreadItem::FileChange(_) => "fileChange",
            ThreadItem::DynamicToolCall(_) => "dynamicToolCall",
            ThreadItem::McpToolCall(_) => "mcpToolCall",
            ThreadItem::CollabAgentToolCall(_) => "collabAgentToolCall",
            ThreadItem::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }

    pub fn id(&self) -> Option<&str> {
        match self {
            ThreadItem::UserMessage(i) => Some(&i.id),
            ThreadItem::AgentMessage(i) => Some(&i.id),
            ThreadItem::Reasoning(i) => Some(&i.id),
            ThreadItem::CommandExecution(i) => Some(&i.id),
            ThreadItem::FileChange(i) => Some(&i.id),
            ThreadItem::DynamicToolCall(i) => Some(&i.id),
            ThreadItem::McpToolCall(i) => Some(&i.id),
            ThreadItem::CollabAgentToolCall(i) => Some(&i.id),
            ThreadItem::Other(v) => v.get("id").and_then(Value::as_str),
        }
    }

    /// Reads an item from its JSON text; never fails (anything unreadable is kept raw).
    pub fn from_json(text: &str) -> Self {
        #[derive(Deserialize)]
        struct Tag<'a> {
            #[serde(rename = "type", borrow, default)]
            kind: Option<std::borrow::Cow<'a, str>>,
        }
        fn typed<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
            serde_json::from_str(text).ok()
        }
        // Codex writes the tag first; read it from the prefix when it is there.
        let kind = match text
            .strip_prefix(r#"{"type":""#)
            .and_then(|rest| rest.split_once('"'))
        {
            Some((tag, _)) if !tag.contains('\\') => Some(std::borrow::Cow::Borrowed(tag)),
            _ => serde_json::from_str::<Tag>(text).ok().and_then(|t| t.kind),
        };
        let parsed = match kind.as_deref().unwrap_or("") {
            "userMessage" => typed(text).map(ThreadItem::UserMessage),
            "agentMessage" => typed(text).map(ThreadItem::AgentMessage),
            "reasoning" => typed(text).map(ThreadItem::Reasoning),
            "commandExecution" => typed(text).map(ThreadItem::CommandExecution),
            "fileChange" => typed(text).map(ThreadItem::FileChange),
            "dynamicToolCall" => typed(text).map(ThreadItem::DynamicToolCall),
            "mcpToolCall" => typed(text).map(ThreadItem::McpToolCall),
            "collabAgentToolCall" => typed(text).map(ThreadItem::CollabAgentToolCall),
            _ => None,
        };
        parsed
            .unwrap_or_else(|| ThreadItem::Other(serde_json::from_str(text).unwrap_or(Value::Null)))
    }

    /// Reads an item from JSON; never fails.
    pub fn from_value(value: Value) -> Self {
        fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
            T::deserialize(v).ok()
        }
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        let parsed = match kind {
            "userMessage" => typed(&value).map(ThreadItem::UserMessage),
            "agentMessage" => typed(&value).map(ThreadItem::AgentMessage),
            "reasoning" => typed(&value).map(ThreadItem::Reasoning),
            "commandExecution" => typed(&value).map(ThreadItem::CommandExecution),
            "fileChange" => typed(&value).map(ThreadItem::FileChange),
            "dynamicToolCall" => typed(&value).map(ThreadItem::DynamicToolCall),
            "mcpToolCall" => typed(&value).map(ThreadItem::McpToolCall),
            "collabAgentToolCall" => typed(&value).map(ThreadItem::CollabAgentToolCall),
            _ => None,
        };
        parsed.unwrap_or(ThreadItem::Other(value))
    }

    pub fn to_value(&self) -> Value {
        fn tagged<T: Serialize>(kind: &str, item: &T) -> Value {
            let mut v = serde_json::to_value(item).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut v {
                map.insert("type".into(), Value::String(kind.into()));
            }
            v
        }
        match self {
            ThreadItem::UserMessage(i) => tagged(self.kind(), i),
            ThreadItem::AgentMessage(i) => tagged(self.kind(), i),
            ThreadItem::Reasoning(i) => tagged(self.kind(), i),
            ThreadItem::CommandExecution(i) => tagged(self.kind(), i),
            ThreadItem::FileChange(i) => tagged(self.kind(), i),
            ThreadItem::DynamicToolCall(i) => tagged(self.kind(), i),
            ThreadItem::McpToolCall(i) => tagged(self.kind(), i),
            ThreadItem::CollabAgentToolCall(i) => tagged(self.kind(), i),
            ThreadItem::Other(v) => v.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for ThreadItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Kept as text first, then parsed once into the right type: no intermediate tree.
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Ok(ThreadItem::from_json(raw.get()))
    }
}

impl Serialize for ThreadItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_kinds_parse_and_unknown_kinds_are_kept_raw() {
        let cmd = ThreadItem::from_value(json!({
            "type": "commandExecution", "id": "c1", "command": "echo hi", "cwd": "/w",
            "status": "declined", "commandActions": [], "newField": 1
        }));
        match &cmd {
            ThreadItem::CommandExecution(c) => assert_eq!(c.status, ItemStatus::Declined),
            other => panic!("{other:?}"),
        }
        let raw = json!({"type": "imageGeneration", "id": "g1", "result": "..."});
        let other = ThreadItem::from_value(raw.clone());
        assert_eq!(other, ThreadItem::Other(raw.clone()));
        assert_eq!(other.kind(), "imageGeneration");
        assert_eq!(other.to_value(), raw);
        // A known kind with a shape we cannot read is kept raw too.
        let odd = json!({"type": "agentMessage", "text": "no id"});
        assert_eq!(
            ThreadItem::from_value(odd.clone()),
            ThreadItem::Other(odd.clone())
        );
        // The same through serde, from text and from a value.
        let text = r#"{"type":"agentMessage","id":"m","text":"hi","phase":null}"#;
        let from_text: ThreadItem = serde_json::from_str(text).unwrap();
        assert!(matches!(from_text, ThreadItem::AgentMessage(ref m) if m.text == "hi"));
        let from_value: ThreadItem =
            serde_json::from_value(serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(from_text, from_value);
        assert_eq!(
            serde_json::from_value::<ThreadItem>(odd.clone()).unwrap(),
            ThreadItem::Other(odd)
        );
    }
}
