//! The notification settings (`--notify FILE`, TOML): where links point, whether they answer,
//! the webhook targets with their format, secret and events, and how long to retry.

use std::time::Duration;

use serde::Deserialize;

/// What a target is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A request waits for a person (approval, question, tool call).
    Request,
    /// A session's turn completed.
    TurnCompleted,
    /// A session's turn failed.
    TurnFailed,
    /// A request was answered: the decision, who decided (a front, a rule, a timeout), and
    /// the signed-in person who did, when one did. Webhooks only (never a push).
    RequestResolved,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::TurnCompleted => "turn-completed",
            Self::TurnFailed => "turn-failed",
            Self::RequestResolved => "request-resolved",
        }
    }
}

/// How a webhook's body and headers are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// JSON `{type, timestamp, data}`, signed as Standard Webhooks says.
    Standard,
    /// ntfy: the URL is the topic; text body, `Title`, `Click`, `Actions` headers.
    Ntfy,
    /// Slack-compatible incoming webhooks: `{text, blocks}` with link buttons.
    Slack,
}

/// One webhook target.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Letters, digits, `-`, `_`: shown in the UI and metrics.
    pub name: String,
    pub url: String,
    #[serde(default = "standard")]
    pub format: Format,
    /// `whsec_<base64>` (Standard Webhooks); for ntfy, an access token sent as Bearer.
    #[serde(default)]
    pub secret: Option<String>,
    /// A file whose first line is the secret (kept out of this file).
    #[serde(default)]
    pub secret_file: Option<String>,
    /// Default: `["request"]`.
    #[serde(default = "requests_only")]
    pub events: Vec<EventKind>,
}

impl std::fmt::Debug for Webhook {
    /// Never shows the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("format", &self.format)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .field("events", &self.events)
            .finish()
    }
}

fn standard() -> Format {
    Format::Standard
}

fn requests_only() -> Vec<EventKind> {
    vec![EventKind::Request]
}

/// Everything `--notify` configures.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// The relay's address as people reach it (`https://relay.example.com`): the base of every
    /// link in a notification. Default: the address `serve` listens on.
    #[serde(default)]
    pub public_url: Option<String>,
    /// Put signed, single-use links that answer the request (approve / deny) into
    /// notifications. Off by default: whoever reads the notification can answer.
    #[serde(default)]
    pub answer_links: bool,
    /// How long an answer link works, in seconds (default 900).
    #[serde(default = "ttl_default")]
    pub answer_link_ttl_secs: u64,
    /// The longest wait between two attempts, in seconds (default 60; attempts start 1 s
    /// apart and double).
    #[serde(default = "retry_max_default")]
    pub retry_max_delay_secs: u64,
    /// Stop retrying a notification this long after it was queued, in seconds (default a day).
    #[serde(default = "give_up_default")]
    pub give_up_after_secs: u64,
    /// Web Push to the browsers that subscribed in the UI (default on).
    #[serde(default = "yes")]
    pub push: bool,
    /// VAPID `sub`: a `mailto:` or `https:` contact for push services (default: mailto:
    /// codex-relay@localhost).
    #[serde(default)]
    pub vapid_subject: Option<String>,
    #[serde(default, rename = "webhook")]
    pub webhooks: Vec<Webhook>,
    /// Re-notify and escalation of requests nobody opened (docs/NOTIFY.md).
    #[serde(default)]
    pub escalation: Escalation,
    /// How long outbox rows and their delivery trails are kept once done with: `30d`, `12h`,
    /// `off` (default `30d`). A notification still being retried is never pruned.
    #[serde(default = "retention_default")]
    pub retention: String,
}

/// When a request's notifications are sent again, and when they go to a second channel.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Escalation {
    /// Send a request's notifications again when none was opened this long after the last
    /// round, in seconds (default 90; 0: never).
    #[serde(default = "renotify_default")]
    pub renotify_after_secs: u64,
    /// At most this many re-sends per request (default 2).
    #[serde(default = "renotify_max_default")]
    pub renotify_max: u32,
    /// Notify [`Escalation::to`] when no notification of a request was opened this long after
    /// it opened, in seconds (default 120; 0: only when every channel failed), or once half
    /// its time to the approval timeout has passed, or at once when every other channel
    /// failed (or there is none).
    #[serde(default = "escalate_default")]
    pub after_secs: u64,
    /// The second channel: webhook names, `push` for every subscribed browser, and
    /// `user:<name>` for the browsers a named user subscribed to push (signed in as them). A
    /// webhook or `push` named here is kept for escalation (not notified at first).
    #[serde(default)]
    pub to: Vec<String>,
}

impl Default for Escalation {
    fn default() -> Self {
        Escalation {
            renotify_after_secs: renotify_default(),
            renotify_max: renotify_max_default(),
            after_secs: escalate_default(),
            to: Vec::new(),
        }
    }
}

fn renotify_default() -> u64 {
    90
}
fn renotify_max_default() -> u32 {
    2
}
fn escalate_default() -> u64 {
    120
}
fn retention_default() -> String {
    "30d".into()
}

fn ttl_default() -> u64 {
    900
}
fn retry_max_default() -> u64 {
    60
}
fn give_up_default() -> u64 {
    86_400
}
fn yes() -> bool {
    true
}

impl Default for NotifyConfig {
    fn default() -> Self {
        toml::from_str("").expect("the defaults parse")
    }
}

/// What is wrong with a notify file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub message: String,
}

impl NotifyConfig {
    /// Reads a notify file's `text` (`file` names it in errors); secret files are read here.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError {
            file: file.to_owned(),
            message,
        };
        let mut c: NotifyConfig = toml::from_str(text).map_err(|e| err(e.message().to_owned()))?;
        let mut names = std::collections::HashSet::new();
        for w in &mut c.webhooks {
            if w.name.is_empty()
                || w.name.len() > 40
                || !w
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "-_".contains(ch))
            {
                return Err(err(format!(
                    "webhook {:?}: name: use 1 to 40 letters, digits, `-` or `_`",
                    w.name
                )));
            }
            if !names.insert(w.name.clone()) {
                return Err(err(format!("webhook {:?} is defined twice", w.name)));
            }
            if !(w.url.starts_with("https://") || w.url.starts_with("http://")) {
                return Err(err(format!("webhook {:?}: url must be http(s)", w.name)));
            }
            if let Some(path) = &w.secret_file {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| err(format!("webhook {:?}: secret_file {path}: {e}", w.name)))?;
                w.secret = text.lines().next().map(|l| l.trim().to_owned());
            }
            if w.format == Format::Standard {
                let Some(secret) = &w.secret else {
                    return Err(err(format!(
                        "webhook {:?}: a standard webhook is signed: give secret or secret_file (whsec_<base64>)",
                        w.name
                    )));
                };
                crate::standard::secret_bytes(secret)
                    .map_err(|e| err(format!("webhook {:?}: secret: {e}", w.name)))?;
            }
            if w.events.is_empty() {
                return Err(err(format!("webhook {:?}: events is empty", w.name)));
            }
        }
        for t in &c.escalation.to {
            if t == "push" || c.webhooks.iter().any(|w| &w.name == t) {
                continue;
            }
            if let Some(name) = t.strip_prefix("user:") {
                // Whether the user exists is known only once the store is open: escalation
                // says so on the request's trail.
                if name.trim().is_empty() || name.trim() != name {
                    return Err(err(format!(
                        "escalation.to {t:?}: name the user after `user:`, with no spaces around it"
                    )));
                }
                continue;
            }
            return Err(err(format!(
                "escalation.to {t:?}: no webhook of that name (name a webhook, `push` or `user:<name>`)"
            )));
        }
        codex_relay_core::store::Retention::parse_age(&c.retention)
            .map_err(|e| err(format!("retention: {e}")))?;
        if let Some(url) = &c.public_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(err("public_url must be an http(s) URL".into()));
        }
        Ok(c)
    }

    /// How long done notifications are kept (`None`: for ever).
    pub fn retention(&self) -> Option<Duration> {
        codex_relay_core::store::Retention::parse_age(&self.retention).unwrap_or(None)
    }

    /// Whether `target` (a webhook's name, or `push`) is kept for escalation.
    pub fn escalation_only(&self, target: &str) -> bool {
        self.escalation.to.iter().any(|t| t == target)
    }

    pub fn answer_link_ttl(&self) -> Duration {
        Duration::from_secs(self.answer_link_ttl_secs.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::NotifyConfig;

    const HOOK: &str =
        "[[webhook]]\nname = \"ops\"\nurl = \"https://h.example/x\"\nformat = \"ntfy\"\n";

    #[test]
    fn escalation_and_retention_read_as_written_and_refuse_what_cannot_work() {
        let d = NotifyConfig::parse("n.toml", "").unwrap();
        assert_eq!(
            (
                d.escalation.renotify_after_secs,
                d.escalation.renotify_max,
                d.escalation.after_secs
            ),
            (90, 2, 120)
        );
        assert!(d.escalation.to.is_empty());
        assert_eq!(
            d.retention(),
            Some(std::time::Duration::from_secs(30 * 86_400))
        );
        let c = NotifyConfig::parse(
            "n.toml",
            &format!("retention = \"off\"\n[escalation]\nto = [\"ops\", \"push\"]\n{HOOK}"),
        )
        .unwrap();
        assert!(c.escalation_only("ops") && c.escalation_only("push"));
        assert_eq!(c.retention(), None);
        let err = |text: &str| NotifyConfig::parse("n.toml", text).unwrap_err().message;
        let person =
            NotifyConfig::parse("n.toml", "[escalation]\nto = [\"user:alice\"]\n").unwrap();
        assert_eq!(person.escalation.to, ["user:alice"]);
        assert!(err("[escalation]\nto = [\"user:\"]\n").contains("name the user"));
        assert!(err("[escalation]\nto = [\"pager\"]\n").contains("no webhook of that name"));
        assert!(err("retention = \"a while\"").starts_with("retention:"));
        assert!(err("[escalation]\nafter = 3\n").contains("unknown field"));
    }
}
