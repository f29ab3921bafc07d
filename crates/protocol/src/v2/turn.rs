//! Turn requests (`turn/start`, `turn/steer`, `turn/interrupt`), user input and the `Turn` object.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::common::ApprovalPolicy;

/// One piece of user input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    Text {
        text: String,
    },
    /// An image by URL (`data:` URLs work too).
    Image {
        url: String,
    },
    /// An image file on the machine Codex runs on.
    LocalImage {
        path: String,
    },
}

impl UserInput {
    pub fn text(text: impl Into<String>) -> Self {
        UserInput::Text { text: text.into() }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    /// JSON schema the final assistant message must follow; reaches the model as `text.format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Reasoning effort for this turn and the ones after it (`low`, `medium`, `high`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<ApprovalPolicy>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `turn/steer` (0.169): add input to the running turn; fails unless `expected_turn_id` is the
/// active turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    pub expected_turn_id: String,
    pub input: Vec<UserInput>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerResponse {
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResponse {
    pub turn: Turn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    InProgress,
    Completed,
    Interrupted,
    Failed,
    /// A status newer than this crate.
    #[serde(other)]
    Unknown,
}

/// A turn as the server describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub id: String,
    pub status: TurnStatus,
    /// `{message, codexErrorInfo?, additionalDetails?}` when the turn failed.
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(default)]
    pub items: Vec<super::item::ThreadItem>,
}
