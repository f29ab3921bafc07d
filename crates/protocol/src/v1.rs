//! The few methods of the older v1 conversation API that codex-relay still needs: on Codex
//! versions without `turn/steer` (0.98), `sendUserMessage` adds input to the running turn.

use serde::{Deserialize, Serialize};

/// One input item in the v1 shape: `{type: "text", data: {text}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "camelCase")]
pub enum InputItem {
    Text { text: String },
    Image { image_url: String },
    LocalImage { path: String },
}

/// `sendUserMessage`: params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendUserMessageParams {
    /// The thread id.
    pub conversation_id: String,
    pub items: Vec<InputItem>,
}

pub const SEND_USER_MESSAGE: &str = "sendUserMessage";
