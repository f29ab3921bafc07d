//! Who decides a pending request, typed: a person through one of the relay's fronts or an
//! answer link, a library caller, a rule, the deadline, or the relay itself. Every answer is
//! given with one ([`crate::relay::Relay::respond`]); the log records it as the word clients
//! have always seen (`http`, `mcp`, `answer-link`, `rule:<name>`, `timeout`, ...), and how a
//! request ended ([`Resolution`]).

use serde::{Deserialize, Serialize};

/// The relay's own fronts a person answers through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// The HTTP API and the web UI (`http`).
    Http,
    /// MCP's `codex_respond` tool and its input-required answers (`mcp`).
    Mcp,
    /// An MCP client's elicitation form (`mcp-elicitation`).
    McpElicitation,
    /// The legacy `codex mcp-server` contract (`mcp-legacy`).
    Legacy,
}

impl Front {
    pub const ALL: [Front; 4] = [Self::Http, Self::Mcp, Self::McpElicitation, Self::Legacy];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Mcp => "mcp",
            Self::McpElicitation => "mcp-elicitation",
            Self::Legacy => "mcp-legacy",
        }
    }
}

/// Who resolved (or resolves) a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// A person through one of the relay's fronts.
    Person(Front),
    /// A person through an answer link in a notification (`answer-link`).
    AnswerLink,
    /// A program using the library, by the name it gives (`library` for `codex-relay run`).
    /// Also what a stored word this version does not know reads back as.
    Library(String),
    /// An approval rule (recorded `rule:<name>`), as the request opened.
    Rule(RuleWord),
    /// Nobody answered before the deadline.
    Timeout,
    /// The Codex process that asked is gone.
    CodexExit,
    SessionClosed,
    /// The turn that asked ended (interrupted, failed) before anyone answered.
    TurnEnded,
    RelayRestart,
    RelayShutdown,
    /// Another client of the shared Codex daemon answered first (the terminal, say): the
    /// relay's request was withdrawn (`codex-client`).
    OtherClient,
}

/// A rule as a decider: its word `rule:<name>` (make it with [`Decider::rule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleWord(String);

impl RuleWord {
    /// The rule's name.
    pub fn name(&self) -> &str {
        &self.0[RULE_PREFIX.len()..]
    }
}

/// The prefix of a rule's word (`rule:<name>`).
pub const RULE_PREFIX: &str = "rule:";
const ANSWER_LINK: &str = "answer-link";

impl Decider {
    /// A library caller named `name` (see [`Decider::Library`]).
    pub fn library(name: impl Into<String>) -> Self {
        Self::Library(name.into())
    }

    /// Answered by the rule named `name`.
    pub fn rule(name: &str) -> Self {
        Self::Rule(RuleWord(format!("{RULE_PREFIX}{name}")))
    }

    /// Reads a recorded word.
    pub fn parse(s: &str) -> Self {
        match s {
            "timeout" => Self::Timeout,
            "codex-exit" => Self::CodexExit,
            "session-closed" => Self::SessionClosed,
            "turn-ended" => Self::TurnEnded,
            "relay-restart" => Self::RelayRestart,
            "relay-shutdown" => Self::RelayShutdown,
            "codex-client" => Self::OtherClient,
            ANSWER_LINK => Self::AnswerLink,
            rule if rule.starts_with(RULE_PREFIX) => Self::Rule(RuleWord(rule.to_owned())),
            word => match Front::ALL.into_iter().find(|f| f.as_str() == word) {
                Some(front) => Self::Person(front),
                None => Self::Library(word.to_owned()),
            },
        }
    }

    /// The recorded word (as stored, on the wire and in every front).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Person(f) => f.as_str(),
            Self::AnswerLink => ANSWER_LINK,
            Self::Library(name) => name,
            Self::Rule(word) => &word.0,
            Self::Timeout => "timeout",
            Self::CodexExit => "codex-exit",
            Self::SessionClosed => "session-closed",
            Self::TurnEnded => "turn-ended",
            Self::RelayRestart => "relay-restart",
            Self::RelayShutdown => "relay-shutdown",
            Self::OtherClient => "codex-client",
        }
    }

    /// The rule's name, when a rule answered.
    pub fn rule_name(&self) -> Option<&str> {
        match self {
            Self::Rule(word) => Some(word.name()),
            _ => None,
        }
    }

    /// What kind of decider it was, as every front shows it: `human` (a front, a link, a
    /// library caller), `rule`, `timeout`, `restart` (the relay restarted or shut down), or
    /// `relay` (Codex went away, the session closed, the turn ended first).
    pub fn who(&self) -> &'static str {
        match self {
            Self::Person(_) | Self::AnswerLink | Self::Library(_) | Self::OtherClient => "human",
            Self::Rule(_) => "rule",
            Self::Timeout => "timeout",
            Self::RelayRestart | Self::RelayShutdown => "restart",
            Self::CodexExit | Self::SessionClosed | Self::TurnEnded => "relay",
        }
    }

    /// Someone answered (a person or a library caller), rather than a rule or the relay.
    pub fn is_person(&self) -> bool {
        self.who() == "human"
    }

    /// Why a caller of the engine may not answer as this decider, if it may not: rules, links,
    /// deadlines and the relay decide only inside the engine, and a library caller's name must
    /// read back as itself (not empty, not another decider's word).
    pub fn refusal(&self) -> Option<String> {
        match self {
            Self::Person(_) => None,
            Self::Library(name) if Self::parse(name) == *self && !name.trim().is_empty() => None,
            Self::Library(name) => Some(format!(
                "a caller cannot call itself {name:?}: that word names another decider"
            )),
            other => Some(format!(
                "only the relay answers as {:?} (a rule, a link, the deadline or the relay itself)",
                other.as_str()
            )),
        }
    }
}

impl std::fmt::Display for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Decider {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Decider {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::parse(&String::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deciders_keep_their_words() {
        for word in [
            "http",
            "mcp",
            "mcp-elicitation",
            "mcp-legacy",
            "answer-link",
            "library",
            "rule:git-status",
            "timeout",
            "codex-exit",
            "session-closed",
            "turn-ended",
            "relay-restart",
            "relay-shutdown",
            "codex-client",
        ] {
            let d = Decider::parse(word);
            assert_eq!(d.as_str(), word);
            assert_eq!(serde_json::to_value(&d).unwrap(), json!(word));
            assert_eq!(serde_json::from_value::<Decider>(json!(word)).unwrap(), d);
        }
        assert_eq!(Decider::parse("http"), Decider::Person(Front::Http));
        assert_eq!(Decider::parse("answer-link"), Decider::AnswerLink);
        let rule = Decider::rule("git-status");
        assert_eq!(Decider::parse("rule:git-status"), rule);
        assert_eq!(rule.rule_name(), Some("git-status"));
        assert_eq!((rule.who(), Decider::Timeout.who()), ("rule", "timeout"));
        assert_eq!(Decider::parse("relay-restart").who(), "restart");
        assert!(Decider::AnswerLink.is_person() && !Decider::Timeout.is_person());
    }

    #[test]
    fn callers_answer_only_as_people_or_under_a_name_of_their_own() {
        assert_eq!(Decider::Person(Front::Mcp).refusal(), None);
        assert_eq!(Decider::library("nightly-bot").refusal(), None);
        for bad in [
            Decider::library("rule:st"),
            Decider::library("timeout"),
            Decider::library("answer-link"),
            Decider::library("http"),
            Decider::library(" "),
            Decider::rule("st"),
            Decider::AnswerLink,
            Decider::Timeout,
            Decider::RelayRestart,
        ] {
            assert!(bad.refusal().is_some(), "{bad:?}");
        }
    }
}

/// How a pending request ended.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolution {
    pub id: String,
    pub decision: crate::answer::Decision,
    /// Who answered: a front (by its name), the deadline, Codex going away, the session
    /// closing, the relay restarting or shutting down.
    pub by: Decider,
    pub reason: Option<String>,
    /// The person who answered, when a signed-in person did (their name, id, role, front and
    /// device); `by` keeps the front's word.
    #[serde(default, rename = "byUser", skip_serializing_if = "Option::is_none")]
    pub by_user: Option<crate::person::Person>,
}
