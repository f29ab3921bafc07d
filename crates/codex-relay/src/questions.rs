//! Questions and elicitations: what Codex asks that is not an approval (the model's `request_user_input` questions, MCP servers' elicitations), answered by a policy or an async callback, and failing closed.

use std::future::Future;
use std::sync::Arc;

use codex_relay_core::answer::PendingKind;
use codex_relay_core::{PendingDetails, PendingView};
use futures::future::BoxFuture;
use serde_json::Value;

type Callback = dyn Fn(Question) -> BoxFuture<'static, Answer> + Send + Sync;

/// Who answers the model's questions and MCP servers' elicitations in a session's runs.
///
/// Whatever the policy, nothing waits forever: a request nobody answers is declined when the
/// client's approval timeout ([`crate::ClientBuilder::approval_timeout`]) passes, and a callback
/// that panics or gives an answer that does not fit is declined at once.
///
/// ```
/// use codex_relay::{Answer, QuestionKind, Questions};
///
/// let questions = Questions::callback(|q| async move {
///     match q.kind {
///         // Pick the first option of each question.
///         QuestionKind::Question => Answer::Answers(
///             q.questions.iter().map(|item| item.options.first().cloned().unwrap_or_default()).collect(),
///         ),
///         // Accept a form with fixed content.
///         QuestionKind::Elicitation => Answer::Accept(serde_json::json!({"confirm": true})),
///         _ => Answer::Decline,
///     }
/// });
/// # let _ = questions;
/// ```
#[derive(Clone, Default)]
pub enum Questions {
    /// Not answered by this client: another front (MCP, HTTP, the web UI) sharing the engine
    /// may answer; otherwise the approval timeout declines the request. The default.
    #[default]
    Unanswered,
    /// Declined at once: the model is told the user declined to answer, an elicitation is
    /// declined, and the turn goes on.
    Decline,
    /// Your function answers each.
    Callback(Arc<Callback>),
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Questions::Unanswered => "Unanswered",
            Questions::Decline => "Decline",
            Questions::Callback(_) => "Callback",
        })
    }
}

impl Questions {
    /// Answers each question or elicitation with `f`.
    pub fn callback<F, Fut>(f: F) -> Self
    where
        F: Fn(Question) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Answer> + Send + 'static,
    {
        Questions::Callback(Arc::new(move |q| Box::pin(f(q))))
    }

    /// The answer to one request; `None` leaves it to other fronts and the timeout.
    pub(crate) async fn decide(&self, question: Question) -> Option<Answer> {
        match self {
            Questions::Unanswered => None,
            Questions::Decline => Some(Answer::Decline),
            Questions::Callback(f) => {
                let call = std::panic::AssertUnwindSafe(f(question));
                match futures::FutureExt::catch_unwind(call).await {
                    Ok(answer) => Some(answer),
                    Err(_) => {
                        tracing::warn!("the question callback panicked; declining the request");
                        Some(Answer::Decline)
                    }
                }
            }
        }
    }
}

/// What is being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuestionKind {
    /// The model asks the user (`item/tool/requestUserInput`, in plan mode): see
    /// [`Question::questions`].
    Question,
    /// An MCP server Codex uses asks for input (`mcpServer/elicitation/request`): see
    /// [`Question::message`] and [`Question::requested_schema`].
    Elicitation,
}

/// One question the model asks, with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuestionItem {
    /// The question's id (answers go in the order of [`Question::questions`]).
    pub id: String,
    /// A short header, when the model gave one.
    pub header: Option<String>,
    /// The question.
    pub question: String,
    /// The option labels to choose from (empty: free text).
    pub options: Vec<String>,
    /// Free text is accepted besides the options.
    pub is_other: bool,
    /// The answer should not be shown back.
    pub is_secret: bool,
}

/// One question or elicitation, as your callback sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Question {
    /// The request's id in the relay (answerable from any front while it is pending).
    pub id: String,
    /// The session (Codex thread) that asks.
    pub session_id: String,
    /// What is asked.
    pub kind: QuestionKind,
    /// The model's questions, for [`QuestionKind::Question`].
    pub questions: Vec<QuestionItem>,
    /// The MCP server that asks, for [`QuestionKind::Elicitation`].
    pub server: Option<String>,
    /// The elicitation's message.
    pub message: Option<String>,
    /// The JSON schema of the form an elicitation wants filled in.
    pub requested_schema: Option<Value>,
    /// The page an elicitation in `url` mode sends the user to.
    pub url: Option<String>,
    /// Everything Codex sent, as the relay keeps it.
    pub details: Value,
}

impl Question {
    /// The question behind a pending view, when it is a question or an elicitation.
    pub(crate) fn from_pending(view: &PendingView) -> Option<Self> {
        let base = |kind| Question {
            id: view.id.clone(),
            session_id: view.session_id.clone(),
            kind,
            questions: Vec::new(),
            server: None,
            message: None,
            requested_schema: None,
            url: None,
            details: serde_json::to_value(&view.details).unwrap_or_default(),
        };
        match view.kind {
            PendingKind::Question => Some(Question {
                questions: view
                    .questions()
                    .iter()
                    .map(|q| QuestionItem {
                        id: q.id.clone(),
                        header: q.header.clone(),
                        question: q.question.clone(),
                        options: q
                            .options
                            .iter()
                            .flatten()
                            .map(|o| o.label.clone())
                            .collect(),
                        is_other: q.is_other,
                        is_secret: q.is_secret,
                    })
                    .collect(),
                ..base(QuestionKind::Question)
            }),
            PendingKind::Elicitation if crate::approval::is_mcp_tool_approval(view) => None,
            PendingKind::Elicitation => {
                let empty = serde_json::Map::new();
                let d = match &view.details {
                    PendingDetails::Elicitation { params } => params,
                    _ => &empty,
                };
                let text = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
                Some(Question {
                    server: text("serverName"),
                    message: text("message"),
                    requested_schema: d.get("requestedSchema").cloned(),
                    url: text("url"),
                    ..base(QuestionKind::Elicitation)
                })
            }
            PendingKind::CommandApproval
            | PendingKind::FileChangeApproval
            | PendingKind::PermissionsApproval
            | PendingKind::ToolCall
            | PendingKind::Other => None,
        }
    }
}

/// Your answer to a [`Question`].
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// One answer per question, in order: an option's label (any case) or, where
    /// [`QuestionItem::is_other`] allows, free text. For an elicitation, a single JSON object
    /// text is taken as the form's content.
    Answers(Vec<String>),
    /// Accept an elicitation with this form content (a JSON object; `{}` for none).
    Accept(Value),
    /// Decline: the model is told the user declined to answer; an elicitation is declined.
    Decline,
}

impl Answer {
    /// One answer to a single question.
    pub fn one(text: impl Into<String>) -> Self {
        Answer::Answers(vec![text.into()])
    }

    /// The engine's answer; `Err` when an elicitation's content is not a form.
    pub(crate) fn engine(&self) -> Result<codex_relay_core::Answer, String> {
        use codex_relay_core::Answer as Engine;
        match self {
            Answer::Answers(answers) => Ok(Engine::Answers(answers.clone())),
            Answer::Accept(Value::Object(content)) if content.is_empty() => Ok(Engine::approve()),
            Answer::Accept(Value::Object(content)) => Engine::form(content.clone()),
            Answer::Accept(other) => Err(format!("a form's content is a JSON object, not {other}")),
            Answer::Decline => Ok(Engine::Deny { reason: None }),
        }
    }
}
