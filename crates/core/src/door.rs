//! The one door every answer to a pending request goes through, with its typed decider: it
//! finds the request where it lives (this instance's broker, or, in a cluster, the session's
//! owner), records the answer under the owner's fence, and hands it to the broker, whose
//! `settle` ends every request (answers, rules, deadlines, the relay failing closed).

use crate::answer::Answer;
use crate::broker::Resolution;
use crate::decider::Decider;
use crate::error::RelayError;
use crate::relay::Relay;

impl Relay {
    /// Answers a pending request as `by`: a person through a front
    /// ([`Decider::Person`]) or a library caller ([`Decider::Library`]); the first answer
    /// wins. Rules, answer links, deadlines and the relay decide only inside the engine.
    pub async fn respond(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Answer,
        by: Decider,
    ) -> Result<Resolution, RelayError> {
        self.respond_as(session_id, request_id, answer, by, None)
            .await
    }

    /// [`Relay::respond`], naming the signed-in person who answered (recorded as the
    /// resolution's `byUser`, beside the front's word in `by`).
    pub async fn respond_as(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Answer,
        by: Decider,
        person: Option<crate::people::Person>,
    ) -> Result<Resolution, RelayError> {
        if let Some(message) = by.refusal() {
            return Err(RelayError::InvalidAnswer {
                id: request_id.to_owned(),
                message,
            });
        }
        self.decide(session_id, request_id, answer, by, person)
            .await
    }

    /// The door: answers request `request_id` of `session_id` as `by` wherever it is. On the
    /// owner the answer is first recorded in the cluster's answers table under its fence (the
    /// first answer wins across instances), then given to the broker; on another instance it
    /// is carried to the owner, which does the same. The caller hears of it once the log has
    /// it.
    pub(crate) async fn decide(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Answer,
        by: Decider,
        person: Option<crate::people::Person>,
    ) -> Result<Resolution, RelayError> {
        self.check_writable()?;
        if self.known_anywhere(session_id).await?.remote {
            let op = crate::op::Respond {
                session: session_id.to_owned(),
                request: request_id.to_owned(),
                answer,
                by,
                person,
            };
            return crate::op::reply_of(&self.placement().carry(&self.host(), op.into()).await?);
        }
        let epoch = self.placement_epoch();
        if self.inner.broker.is_open(session_id, request_id) {
            self.placement()
                .claim_answer(&self.host(), session_id, request_id, &by)
                .await?;
        }
        let resolution = self
            .inner
            .broker
            .answer_as(session_id, request_id, answer, by, person)
            .await?;
        // The caller hears of the answer once the log has it.
        self.confirm_stored(epoch).await?;
        Ok(resolution)
    }
}
