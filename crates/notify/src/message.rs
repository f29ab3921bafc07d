//! One notification as kept in the outbox (never with an answer link's token) and as each
//! format sends it: Standard Webhooks JSON, ntfy headers, a Slack-compatible message, a Web
//! Push payload. Answer links are added at delivery, minted for that attempt.

use codex_relay_core::{PendingDetails, PendingView, SessionSnapshot};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::EventKind;

/// A notification's content, stored as the outbox row's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// `request.opened`, `turn.completed`, `turn.failed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Unix milliseconds of the event.
    pub time: i64,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The request's kind (`command_approval`, ...), for requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<String>,
    pub title: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Opens exactly this request (or session) in the UI.
    pub open_url: String,
    /// Whether an answer link may be added (approvals only).
    #[serde(default)]
    pub answerable: bool,
    /// How a request ended (`request.resolved`): `{decision, by, byUser?, reason?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Value>,
}

/// Links that answer, minted for one delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerLinks {
    pub approve: String,
    pub deny: String,
    /// Unix milliseconds.
    pub expires_at: i64,
}

fn base(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// The UI's address of a request.
pub fn open_url(public: &str, session: &str, request: Option<&str>) -> String {
    match request {
        Some(r) => format!("{}/#/s/{session}?request={r}", base(public)),
        None => format!("{}/#/s/{session}", base(public)),
    }
}

impl Message {
    pub fn event(&self) -> EventKind {
        match self.kind.as_str() {
            "turn.completed" => EventKind::TurnCompleted,
            "turn.failed" => EventKind::TurnFailed,
            "request.resolved" => EventKind::RequestResolved,
            _ => EventKind::Request,
        }
    }

    /// A request waiting for a person.
    pub fn request(p: &PendingView, public: &str) -> Self {
        let (title, text, cwd) = match &p.details {
            PendingDetails::CommandApproval { command, cwd, .. } => (
                "Codex asks to run a command".to_owned(),
                format!("$ {}", unwrap_shell(command)),
                cwd.clone(),
            ),
            PendingDetails::FileChangeApproval { changes, .. } => (
                "Codex asks to change files".to_owned(),
                changes
                    .iter()
                    .map(|c| c.path.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
                None,
            ),
            _ => ("Codex asks".to_owned(), p.question.clone(), None),
        };
        let answerable = matches!(
            p.details,
            PendingDetails::CommandApproval { .. } | PendingDetails::FileChangeApproval { .. }
        );
        Message {
            kind: "request.opened".into(),
            time: p.created_at,
            session_id: p.session_id.clone(),
            request_id: Some(p.id.clone()),
            request_kind: serde_json::to_value(p.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned)),
            title,
            text: clip(&text, 600),
            cwd,
            open_url: open_url(public, &p.session_id, Some(&p.id)),
            answerable,
            resolution: None,
        }
    }

    /// Request `id` of `session` was answered (`resolution`: the event's `decision`, `by`,
    /// `byUser`, `reason`), at `time`.
    pub fn resolved(session: &str, id: &str, resolution: Value, time: i64, public: &str) -> Self {
        let decision = resolution["decision"].as_str().unwrap_or("answered");
        let who = match resolution["byUser"]["name"].as_str() {
            Some(name) => format!(
                "{name} ({}, {})",
                resolution["byUser"]["role"].as_str().unwrap_or("?"),
                resolution["by"].as_str().unwrap_or("?")
            ),
            None => resolution["by"].as_str().unwrap_or("the relay").to_owned(),
        };
        let reason = resolution["reason"].as_str().unwrap_or_default();
        Message {
            kind: "request.resolved".into(),
            time,
            session_id: session.to_owned(),
            request_id: Some(id.to_owned()),
            request_kind: None,
            title: format!("Request {decision} by {who}"),
            text: clip(reason, 600),
            cwd: None,
            open_url: open_url(public, session, Some(id)),
            answerable: false,
            resolution: Some(resolution),
        }
    }

    /// A session's turn ended (completed or failed).
    pub fn turn_end(
        s: &SessionSnapshot,
        failed: bool,
        error: Option<&str>,
        time: i64,
        public: &str,
    ) -> Self {
        let (kind, title, text) = if failed {
            (
                "turn.failed",
                "A Codex turn failed",
                error.unwrap_or("the turn failed").to_owned(),
            )
        } else {
            (
                "turn.completed",
                "A Codex turn finished",
                match &s.result {
                    Some(Value::String(t)) => t.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                },
            )
        };
        Message {
            kind: kind.into(),
            time,
            session_id: s.session_id.clone(),
            request_id: None,
            request_kind: None,
            title: title.into(),
            text: clip(&text, 600),
            cwd: s.cwd.clone(),
            open_url: open_url(public, &s.session_id, None),
            answerable: false,
            resolution: None,
        }
    }

    /// Standard Webhooks body: `{type, timestamp, data}`.
    pub fn standard(&self, links: Option<&AnswerLinks>) -> Value {
        let mut data = json!({
            "sessionId": self.session_id, "requestId": self.request_id,
            "requestKind": self.request_kind, "title": self.title, "text": self.text,
            "cwd": self.cwd, "openUrl": self.open_url,
        });
        if let Some(l) = links {
            data["answer"] = json!({"approveUrl": l.approve, "denyUrl": l.deny,
                "expiresAt": iso8601(l.expires_at)});
        }
        if let Some(r) = &self.resolution {
            data["resolution"] = r.clone();
        }
        json!({"type": self.kind, "timestamp": iso8601(self.time), "data": data})
    }

    /// Slack-compatible incoming webhook body.
    pub fn slack(&self, links: Option<&AnswerLinks>) -> Value {
        let mut buttons = vec![json!({"type": "button",
            "text": {"type": "plain_text", "text": "Open"}, "url": self.open_url})];
        if let Some(l) = links {
            buttons.push(json!({"type": "button", "style": "primary",
                "text": {"type": "plain_text", "text": "Approve…"}, "url": l.approve}));
            buttons.push(json!({"type": "button", "style": "danger",
                "text": {"type": "plain_text", "text": "Deny…"}, "url": l.deny}));
        }
        json!({
            "text": format!("{}: {}", self.title, self.text),
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn",
                    "text": format!("*{}*\n```{}```", self.title, self.text.replace("```", "'''"))}},
                {"type": "actions", "elements": buttons},
            ],
        })
    }

    /// ntfy: body and headers (`Title`, `Click`, `Tags`, `Actions`).
    pub fn ntfy(&self, links: Option<&AnswerLinks>) -> (String, Vec<(&'static str, String)>) {
        let mut headers = vec![
            ("Title", ascii(&self.title)),
            ("Click", self.open_url.clone()),
            (
                "Tags",
                if self.event() == EventKind::TurnFailed {
                    "warning"
                } else {
                    "robot"
                }
                .into(),
            ),
        ];
        let mut actions = vec![format!("view, Open, {}", self.open_url)];
        if let Some(l) = links {
            actions.push(format!("view, Approve…, {}", l.approve));
            actions.push(format!("view, Deny…, {}", l.deny));
        }
        headers.push(("Actions", actions.join("; ")));
        (self.text.clone(), headers)
    }

    /// Web Push payload (the service worker shows it).
    pub fn push(&self) -> Value {
        json!({"title": self.title, "body": self.text, "url": self.open_url,
            "tag": self.request_id.as_deref().unwrap_or(&self.session_id),
            "type": self.kind, "sessionId": self.session_id, "requestId": self.request_id})
    }
}

/// `/bin/bash -lc 'cmd'` as `cmd`.
fn unwrap_shell(cmd: &str) -> String {
    for sh in [
        "/bin/bash -lc ",
        "/bin/sh -lc ",
        "/bin/zsh -lc ",
        "bash -lc ",
    ] {
        if let Some(rest) = cmd.strip_prefix(sh)
            && let Some(inner) = rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\''))
            && !inner.contains('\'')
        {
            return inner.to_owned();
        }
    }
    cmd.to_owned()
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// Header values must be ASCII: anything else becomes `?`.
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub use codex_relay_core::time::rfc3339_ms as iso8601;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_commands_read_as_people_expect() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_614_265_330_123), "2021-02-25T15:02:10.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(unwrap_shell("/bin/bash -lc 'git status'"), "git status");
        assert_eq!(
            unwrap_shell("/bin/bash -lc 'echo '\\''x'\\'''"),
            "/bin/bash -lc 'echo '\\''x'\\'''"
        );
        assert_eq!(ascii("Codex asks — now"), "Codex asks ? now");
        assert_eq!(
            open_url("https://r.example/", "s1", Some("r1")),
            "https://r.example/#/s/s1?request=r1"
        );
    }
}
