//! The one door every answer to a pending request goes through: it finds the request where it
//! lives (this instance's broker, or, in a cluster, the session's owner), records the answer
//! under the owner's fence, and hands it to the broker.

use crate::answer::Answer;
use crate::broker::Resolution;
use crate::error::RelayError;
use crate::relay::Relay;
use crate::views::ResolvedBy;

impl Relay {
    /// Answers a pending request; the first answer wins. `by` names the front (or library
    /// caller) that answers; no front may call itself `rule:…`.
    pub async fn respond(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Answer,
        by: &str,
    ) -> Result<Resolution, RelayError> {
        if by.starts_with(crate::views::RULE_PREFIX) {
            return Err(RelayError::InvalidAnswer {
                id: request_id.to_owned(),
                message: format!("a front cannot call itself {by:?}: `rule:` names rules"),
            });
        }
        self.answer_request(session_id, request_id, answer, ResolvedBy::Front(by.into()))
            .await
    }

    /// The door: answers request `request_id` of `session_id` wherever it is. On the owner
    /// the answer is first recorded in the cluster's answers table under its fence (first
    /// answer wins across instances), then given to the broker; on another instance it is
    /// carried to the owner, which does the same. The caller hears of it once the log has it.
    pub(crate) async fn answer_request(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Answer,
        by: ResolvedBy,
    ) -> Result<Resolution, RelayError> {
        self.check_writable()?;
        if self.known_anywhere(session_id).await?.remote {
            return self
                .respond_remote(session_id, request_id, answer, by.as_str())
                .await;
        }
        if self.inner.broker.is_open(session_id, request_id) {
            self.claim_answer(session_id, request_id, by.as_str())
                .await?;
        }
        let resolution = self
            .inner
            .broker
            .answer(session_id, request_id, answer, by)
            .await?;
        self.confirm_stored().await?;
        Ok(resolution)
    }
}
