//! Who did something, as every record names them: a [`Person`] (a named user or the relay's
//! own token) and the [`Role`] they acted with. Plain types on core's ground floor, so events
//! and resolutions can carry them; users, tokens and the audit log are [`crate::people`].

use serde::{Deserialize, Serialize};

/// What a person may do; each role may do everything the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads sessions, their events and streams.
    Viewer,
    /// And answers requests (approvals, questions).
    Approver,
    /// And starts sessions (within the start policy), steers and interrupts them.
    Operator,
    /// And changes rules, notifications, users, tokens and settings.
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Self::Viewer, Self::Approver, Self::Operator, Self::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Approver => "approver",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s.trim())
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The id and name the relay's own token (and the browser logins made from it) are recorded
/// under: the admin's way in.
pub const ADMIN_TOKEN_ID: &str = "admin-token";

/// Who did something, as every record carries it: the person (a named user, or the relay's
/// token), the role they acted with, the front and, where known, the device (User-Agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// The user's id (`usr_...`), or `admin-token` for the relay's token.
    pub id: String,
    pub name: String,
    pub role: Role,
    /// `http`, `ui`, `mcp`, `answer-link`...
    pub front: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl Person {
    /// The holder of the relay's token (or a login made from it), through `front`.
    pub fn admin_token(front: &str) -> Self {
        Self {
            id: ADMIN_TOKEN_ID.to_owned(),
            name: ADMIN_TOKEN_ID.to_owned(),
            role: Role::Admin,
            front: front.to_owned(),
            device: None,
        }
    }

    /// The same person, with a device (a User-Agent, cut to 200 characters).
    pub fn with_device(mut self, device: Option<&str>) -> Self {
        self.device = device
            .map(|d| d.chars().take(200).collect::<String>())
            .filter(|d| !d.trim().is_empty());
        self
    }
}
