//! The audit log as the engine API gives it: one [`AuditEntry`] per thing a person did
//! (started, steered, interrupted, answered, changed a rule, a user, a token, a setting), with
//! who, when and from where; appended only, shared by every relay on the store.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Person, Role};
use crate::store::{AuditFilter, AuditRecord};

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Its place in the log (assigned as stored; 0 before).
    #[serde(default)]
    pub seq: i64,
    /// Unix ms.
    pub at: i64,
    /// RFC 3339, for people reading an export.
    #[serde(default)]
    pub time: String,
    pub person: Person,
    /// The client's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// What was done: `session.start`, `session.message`, `session.interrupt`,
    /// `request.answer`, `rule.put`, `rule.delete`, `user.create`, `token.revoke`...
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What else the action carried (the HTTP method and path, the result's status...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

impl AuditEntry {
    /// An entry for `action` by `person`, now.
    pub fn new(person: Person, action: impl Into<String>) -> Self {
        let at = crate::time::now_ms();
        Self {
            seq: 0,
            at,
            time: crate::time::rfc3339_ms(at),
            person,
            ip: None,
            action: action.into(),
            session: None,
            request: None,
            decision: None,
            rule: None,
            detail: None,
        }
    }

    pub(crate) fn record(&self) -> AuditRecord {
        AuditRecord {
            seq: 0,
            at: self.at,
            user_id: Some(self.person.id.clone()),
            user_name: self.person.name.clone(),
            role: self.person.role.as_str().to_owned(),
            front: self.person.front.clone(),
            device: self.person.device.clone(),
            ip: self.ip.clone(),
            instance: None,
            action: self.action.clone(),
            session_id: self.session.clone(),
            request_id: self.request.clone(),
            decision: self.decision.clone(),
            rule: self.rule.clone(),
            detail: self.detail.as_ref().map(Value::to_string),
        }
    }

    pub(crate) fn from_record(r: AuditRecord) -> Self {
        Self {
            seq: r.seq,
            at: r.at,
            time: crate::time::rfc3339_ms(r.at),
            person: Person {
                id: r.user_id.unwrap_or_default(),
                name: r.user_name,
                role: Role::parse(&r.role).unwrap_or(Role::Viewer),
                front: r.front,
                device: r.device,
            },
            ip: r.ip,
            action: r.action,
            session: r.session_id,
            request: r.request_id,
            decision: r.decision,
            rule: r.rule,
            detail: r.detail.and_then(|d| serde_json::from_str(&d).ok()),
        }
    }
}

/// Which entries to read: every field narrows; none reads the oldest `limit`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditQuery {
    /// A user's id or name (`admin-token` for the relay's token).
    pub user: Option<String>,
    /// An action, or a prefix ending in `.` (`session.`).
    pub action: Option<String>,
    pub session: Option<String>,
    /// From this Unix ms (inclusive).
    pub since: Option<i64>,
    /// Before this Unix ms.
    pub until: Option<i64>,
    /// After this `seq` (paging).
    pub after: Option<i64>,
    /// At most this many (default 1000, at most 10 000).
    pub limit: Option<i64>,
}

impl AuditQuery {
    pub(crate) fn filter(&self) -> AuditFilter {
        AuditFilter {
            user: self.user.clone(),
            action: self.action.clone(),
            session: self.session.clone(),
            since: self.since,
            until: self.until,
            after: self.after,
            limit: self.limit.unwrap_or(1000).clamp(1, 10_000),
        }
    }
}
