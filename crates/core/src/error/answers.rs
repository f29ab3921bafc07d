//! Errors of answering without a person at the screen: an approval rule that cannot be taken,
//! and an answer link that does not answer.

/// Why a rule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("rule {name:?}: {field}: {message}")]
    Invalid {
        name: String,
        field: &'static str,
        message: String,
    },
    #[error("no rule named {0:?}")]
    Unknown(String),
    #[error(
        "rule {0:?} comes from the rules file given with --rules; edit the file (it is read at every start)"
    )]
    FromFile(String),
    #[error("rules cannot be kept: {0}")]
    Store(String),
}

/// Why a link does not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error(
        "this answer link is not valid (altered, or not made by this relay since it last started)"
    )]
    Invalid,
    #[error("this answer link is for another request")]
    OtherRequest,
    #[error("this answer link has expired; answer in the relay's UI")]
    Expired,
    #[error("this answer link was already used")]
    Used,
    #[error("the request was already answered ({decision} by {by})")]
    AlreadyAnswered { decision: String, by: String },
    #[error("the request is no longer open")]
    Gone,
    #[error("the store cannot check this link: {0}")]
    Store(String),
    /// The answer was not confirmed (the store down, the session's owner did not answer in
    /// time: it may still take it); the link was not used. Used again, it answers, or says the
    /// request was already answered (by this link, if the first try landed after all).
    #[error("the answer was not confirmed ({0}); the link was not used: try again in a moment")]
    NotTaken(String),
}
