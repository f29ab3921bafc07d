//! Respond: answers one of a session's requests (the door, door.rs, finds and routes it).

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::Operation;
use crate::answer::Answer;
use crate::broker::Resolution;
use crate::decider::Decider;
use crate::error::RelayError;
use crate::relay::Relay;

/// Answers one of the session's requests, as `by`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Respond {
    pub session: String,
    pub request: String,
    pub answer: Answer,
    /// As its word, as instances of earlier versions send it.
    pub by: Decider,
    /// The signed-in person who answered (absent from instances of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<crate::people::Person>,
}

impl Operation for Respond {
    type Reply = Resolution;
    const AGAIN_IS_HARMLESS: bool = true;
    fn session(&self) -> Option<&str> {
        Some(&self.session)
    }
    fn run_here(self, relay: &Relay) -> BoxFuture<'_, Result<Resolution, RelayError>> {
        Box::pin(async move {
            relay.here(&self.session).await?;
            relay
                .decide(
                    &self.session,
                    &self.request,
                    self.answer,
                    self.by,
                    self.person,
                )
                .await
        })
    }
}
